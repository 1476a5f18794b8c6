#!/usr/bin/env bash
# The GPU tests of attention, then the transformer rows against PyTorch
# (bench-transformer.sh, each step's costliest kernels), then the build before
# this session's attention changes, its attention rows and half step.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/suite.gz > ~/suite && chmod +x ~/suite
gunzip -c .device/bin/bt-base.gz > ~/bt-base && chmod +x ~/bt-base
timeout 150 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
VOLTA_BENCH_KERNELS=1 bash scripts/device/bench-transformer.sh 2>&1 | grep -v "^    "
echo "== before"
VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-base --attention-only 2>&1 | tee "$o/base-att.txt" | grep -v "^    "
VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-base --step-only --step-precision half 2>&1 | tee "$o/base-step.txt" | grep -v "^    "
date -u
echo "== this build, VOLTA_ATTENTION_PREFETCH=1"
gunzip -c .device/bin/bench_transformer.gz > ~/bt-new && chmod +x ~/bt-new
VOLTA_ATTENTION_PREFETCH=1 VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-new --attention-only 2>&1 | tee "$o/prefetch-att.txt" | grep -v "^    "
date -u
