#!/usr/bin/env bash
# The third call (probe3.sh trimmed to the device time left): the operands'
# maxima read as vec4s by up to 1024 workgroups each (before: scalar loads,
# 256 workgroups, 10.9 ms of the step), the large term flushed after every
# K tile (the default) or every second one (flush-2): flush-2's accuracy, the
# products' kernels, the tensor-core tests, and the GPT step against PyTorch
# in the same call.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
echo "== accuracy, VOLTA_EXP_SPLIT_SUM=flush-2" > "$o/accuracy.txt"
VOLTA_EXP_SPLIT_SUM=flush-2 NOASSERT=1 timeout 60 ~/suite split_precision --nocapture 2>&1 \
  | grep -E "split |test result|panicked" \
  | sed 's/CoopTiles { wm: 4, wn: 2, fm: 2, fn_: 4, bk: 32, pad: 8, staging: Prefetch }/large/' >> "$o/accuracy.txt"
VOLTA_BENCH_KERNELS=1 timeout 60 ~/bt --products split 2>&1 | grep -v along_k | grep -v "^$" > "$o/kernels.txt"
timeout 90 ~/suite gpu_tensor_cores 2>&1 | grep -E "panicked|FAILED|test result" | tee "$o/tests.txt"
date -u
timeout 60 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | tee "$o/step.txt"
timeout 60 ~/bt --step-only --step-precision full 2>&1 | grep gpt_step | tee -a "$o/step.txt"
timeout 90 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep torch_ | tee "$o/step-torch.txt"
timeout 60 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | tee -a "$o/step.txt"
VOLTA_EXP_SPLIT_SUM=flush-2 timeout 60 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | sed 's/^/flush-2: /' | tee -a "$o/step.txt"
date -u
