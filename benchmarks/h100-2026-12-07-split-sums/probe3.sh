#!/usr/bin/env bash
# The third call: the operands' maxima read as vec4s by up to 1024 workgroups
# each (before: scalar loads, 256 workgroups: 10.9 ms of the step's 29), and
# the large term flushed every 1, 2 or 4 K tiles: accuracy, each product's
# kernels, the tensor-core tests, and the GPT step against PyTorch in the
# same call.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for sum in flush-2 flush-4; do
  echo "== accuracy, VOLTA_EXP_SPLIT_SUM=$sum"
  VOLTA_EXP_SPLIT_SUM=$sum NOASSERT=1 timeout 90 ~/suite split_precision --nocapture 2>&1 \
    | grep -E "split |test result|panicked" | sed 's/CoopTiles { wm: 4, wn: 2, fm: 2, fn_: 4, bk: 32, pad: 8, staging: Prefetch }/large/'
done | tee "$o/accuracy.txt"
for sum in flush-tile flush-2; do
  echo "== kernels, VOLTA_EXP_SPLIT_SUM=$sum"
  VOLTA_EXP_SPLIT_SUM=$sum VOLTA_BENCH_KERNELS=1 timeout 90 ~/bt --products split 2>&1 | grep -v along_k | grep -v "^$"
done > "$o/kernels.txt" 2>&1
timeout 150 ~/suite gpu_tensor_cores layers_gpu 2>&1 | grep -E "panicked|FAILED|test result" | tee "$o/tests.txt"
date -u
timeout 100 ~/bt --step-only --step-precision all 2>&1 | tee "$o/step.txt"
timeout 120 python3 scripts/device/transformer_peers.py --step-only 2>&1 | tee "$o/step-torch.txt"
VOLTA_EXP_SPLIT_SUM=flush-2 timeout 60 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | sed 's/^/flush-2: /' | tee -a "$o/step.txt"
timeout 60 ~/bt --step-only --step-precision full 2>&1 | grep gpt_step | tee -a "$o/step.txt"
date -u
