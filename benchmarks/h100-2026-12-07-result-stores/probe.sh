#!/usr/bin/env bash
# Tensor-core products' f32 results stored straight from the accumulators
# (VOLTA_EXP_STORE=straight, main's way) or through workgroup memory, four
# elements a lane (default), with workgroup or subgroup barriers
# (VOLTA_EXP_SGBAR=1): the products, then the half step alternating, PyTorch's
# step in the same call; then the split kernel's accuracy with its high halves
# masked (split-mask.patch). Binaries under .device/bin: bench_transformer.gz and
# test_suite.gz (stores.patch on main, release), bt_split.gz and suite_split.gz
# (split-kernel.patch, stores.patch and split-mask.patch). Carry
# .device/{bin,gpu-env.sh,gl}.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bench_transformer test_suite bt_split suite_split; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
timeout 150 ~/test_suite gpu_parity gpu_tensor_cores layers_gpu 2>&1 \
  | grep -E "panicked|error|test result" | tee "$o/tests.txt"
VOLTA_EXP_SGBAR=1 timeout 60 ~/test_suite gpu_tensor_cores 2>&1 \
  | grep -E "panicked|error|test result" | tee -a "$o/tests.txt"
cfgs=("VOLTA_EXP_STORE=straight" "VOLTA_EXP_STORE=cs4" "VOLTA_EXP_SGBAR=1")
for r in 1; do
  for c in "${cfgs[@]}"; do
    echo "== products, round $r, $c"
    env $c timeout 60 ~/bench_transformer --products half 2>&1 | grep product_ | grep -v along_k
  done
done | tee "$o/products.txt"
for r in 1 2 3; do
  for c in "${cfgs[@]}"; do
    echo "== half step, round $r, $c"
    env $c timeout 60 ~/bench_transformer --step-only --step-precision half 2>&1 | grep -E "_B64 "
  done
done | tee "$o/steps.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 scripts/device/transformer_peers.py --step-only 2>&1 | tee "$o/torch.txt"
for rt in 0; do
  echo "== split accuracy, VOLTA_EXP_SPLIT_ROUNDTRIP=$rt"
  env $( [ $rt = 1 ] && echo VOLTA_EXP_SPLIT_ROUNDTRIP=1 ) NOASSERT=1 timeout 60 \
    ~/suite_split split_precision --nocapture 2>&1 | grep -E "split |result"
done | tee "$o/split-accuracy.txt"
date -u
