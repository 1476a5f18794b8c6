#!/usr/bin/env bash
# Split products' reductions: one launch for both operands, kept with each
# operand's memory for its next product (bt2, suite2: main's build) against
# one launch each (bt: main at 24db9bd), the GPT step with split products
# against the f32 kernel, half precision and PyTorch in the same call, the
# split accuracy test on the new build, and the split step's kernel profile.
# Trimmed to fit what was left of the session's device time (every timeout
# below is an upper bound: the call stays under 400 s).
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt bt2 suite2; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 60 ~/suite2 gpu_tensor_cores::split --nocapture 2>&1 | grep -E "panicked|FAILED|test result" | tee "$o/tests.txt"
step() { timeout 45 ~/$1 --step-only --step-precision $2 2>&1 | grep gpt_step | sed "s/^/$1 /" | tee -a "$o/step.txt"; }
step bt split; step bt2 all
timeout 50 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep torch_ | tee "$o/step-torch.txt"
step bt2 split; step bt split
VOLTA_BENCH_KERNELS=1 timeout 45 ~/bt2 --step-only --step-precision split 2>&1 | grep -v "^$" > "$o/step-kernels.txt"
tail -25 "$o/step-kernels.txt"
date -u
