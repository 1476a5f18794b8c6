#!/usr/bin/env bash
# The next call (not run: no device time was left): the GPT
# step with split products (flushed after every K tile) against the f32 kernel
# and PyTorch eager, the tensor-core tests, then each split product's kernels.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 40 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | tee "$o/step.txt"
timeout 40 ~/bt --step-only --step-precision full 2>&1 | grep gpt_step | tee -a "$o/step.txt"
timeout 50 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep torch_ | tee "$o/step-torch.txt"
timeout 40 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | tee -a "$o/step.txt"
date -u
timeout 50 ~/suite gpu_tensor_cores --skip split_precision 2>&1 | grep -E "panicked|FAILED|test result" | tee "$o/tests.txt"
VOLTA_BENCH_KERNELS=1 timeout 40 ~/bt --products split 2>&1 | grep -v along_k | grep -v "^$" > "$o/kernels.txt"
date -u
