#!/usr/bin/env bash
# The final build: the GPU tests of attention and tensor cores (TESTS="" runs
# the whole suite), then the transformer rows against PyTorch, then the step in
# three alternating rounds.
# Carry .device/{gl,gpu-env.sh,bin/{bench_transformer,test_suite}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/test_suite.gz > ~/suite && chmod +x ~/suite
date -u
timeout 300 ~/suite ${TESTS-attention tensor_cores} 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
mkdir -p "$o/peers" "$o/rounds"
OUT="$o/peers" VOLTA_BENCH_KERNELS=1 bash scripts/device/bench-transformer.sh > /dev/null 2>&1
grep -E "ms |profile" "$o/peers/volta-1.txt" "$o/peers/torch.txt" | grep -v calls | head -40
OUT="$o/rounds" ROUNDS=3 bash scripts/device/step-rounds.sh > "$o/rounds/rounds.txt" 2>&1
cat "$o/rounds/rounds.txt"
date -u
