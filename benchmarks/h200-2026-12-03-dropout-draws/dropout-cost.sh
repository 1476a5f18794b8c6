#!/usr/bin/env bash
# What the attention's dropout mask and the step's shapes cost: bench_transformer's
# attention rows at the GPT step's shape (B 64, T 256) and at B 8 T 1024, with and
# without dropout on the weights, and the GPT step with and without it; then the
# PyTorch peers of the same rows and the step's kernel profile (torch.profiler).
# Carry .device/{gl,gpu-env.sh,bin}; BINS names the gzipped binaries in
# .device/bin to run (default: bench_transformer.gz).
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in ${BINS:-bench_transformer.gz}; do
  gunzip -c .device/bin/$b > ~/${b%.gz} && chmod +x ~/${b%.gz}
done
for b in ${BINS:-bench_transformer.gz}; do
  n=${b%.gz}
  for p in 0 0.2; do
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/$n --attention-only --lengths 64x256,8x1024 --attention-dropout $p 2>&1 | tee "$o/$n-attention-p$p.txt" | grep -v "^    "
  done
  for p in 0 0.2; do
    VOLTA_BENCH_KERNELS=1 timeout 150 ~/$n --step-only --attention-dropout $p 2>&1 | tee "$o/$n-step-p$p.txt" | grep -v "^    "
  done
done
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/device/transformer_peers.py --lengths 64x256,8x1024 --attention-dropout 0.2 --attention-only 2>&1 | tee "$o/torch-dropout.txt"
PYTHONUNBUFFERED=1 timeout 200 python3 scripts/device/transformer_peers.py --lengths 64x256,8x1024 --profile-step 2>&1 | tee "$o/torch.txt"
date -u
