#!/usr/bin/env bash
# The next call (not run this session: no device time was left), on main's
# build: the tensor-core tests (Split's accuracy with the vectorised reduction,
# and half precision on the refactored K loop), then the GPT step with split
# products against the f32 kernel and PyTorch eager, then each split
# product's kernels. Binaries: bench_transformer (bt) and the test suite
# (suite), gzipped in .device/bin.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 120 ~/suite gpu_tensor_cores --nocapture 2>&1 | grep -E "split |panicked|FAILED|test result" | tee "$o/tests.txt"
date -u
timeout 40 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | tee "$o/step.txt"
timeout 40 ~/bt --step-only --step-precision full 2>&1 | grep gpt_step | tee -a "$o/step.txt"
timeout 50 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep torch_ | tee "$o/step-torch.txt"
timeout 40 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | tee -a "$o/step.txt"
VOLTA_BENCH_KERNELS=1 timeout 40 ~/bt --products split 2>&1 | grep -v along_k | grep -v "^$" > "$o/kernels.txt"
date -u
