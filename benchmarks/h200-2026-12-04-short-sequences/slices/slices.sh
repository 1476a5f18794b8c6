#!/usr/bin/env bash
# Shorter K slices for the tensor-core products that split K (the weights'
# gradients, K = 16384 tokens): VOLTA_COOP_MIN_SLICE=1024 (the default), 512,
# 256, on the step's products (each row now after a quarter second of its own
# calls) and the half step, alternating; then the f32 products, once.
# Carry .device/{gl,gpu-env.sh,bin/bench_transformer.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
for r in 1 2; do
  for s in 1024 512 256; do
    VOLTA_COOP_MIN_SLICE=$s timeout 100 ~/bt --products half > $o/products-$s-$r.txt 2>&1
    echo "== products slice=$s round $r"; grep -E "dw_|dx_lm" $o/products-$s-$r.txt | grep -v along
    VOLTA_COOP_MIN_SLICE=$s VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt --step-only --step-precision half > $o/step-$s-$r.txt 2>&1
    echo "== step slice=$s round $r"; grep -E "ms |sum rows" $o/step-$s-$r.txt | head -4
  done
done
timeout 100 ~/bt --products full > $o/products-full.txt 2>&1; grep TFLOP $o/products-full.txt
PYTHONUNBUFFERED=1 timeout 100 python3 scripts/device/transformer_peers.py --products > $o/torch.txt 2>&1; grep -E "Full|f16_dw|sum" $o/torch.txt
date -u
