#!/usr/bin/env bash
# Split products' reductions: one launch for both operands, kept with each
# operand's memory for its next product (bt2, suite2: the
# working tree) against one launch each (bt, suite: main at 24db9bd), the
# GPT step with split products against the f32 kernel and PyTorch eager in
# the same call, and the tensor-core tests on the new build.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt bt2 suite2; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 120 ~/suite2 gpu_tensor_cores --nocapture 2>&1 | grep -E "split |panicked|FAILED|test result" | tee "$o/tests.txt"
date -u
step() { timeout 40 ~/$1 --step-only --step-precision $2 2>&1 | grep gpt_step | sed "s/^/$1 /" | tee -a "$o/step.txt"; }
step bt split; step bt2 split; step bt2 full; step bt2 half
timeout 50 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep torch_ | tee "$o/step-torch.txt"
step bt2 split; step bt split
VOLTA_BENCH_KERNELS=1 timeout 40 ~/bt2 --products split 2>&1 | grep -v along_k | grep -v "^$" > "$o/kernels.txt"
VOLTA_BENCH_KERNELS=1 timeout 60 ~/bt2 --step-only --step-precision split 2>&1 | grep -v "^$" > "$o/step-kernels.txt"
date -u
