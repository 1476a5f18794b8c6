#!/usr/bin/env bash
# The attention's dropout draw, before and after, in one call: the GPU tests of
# attention (the CPU's rule against the kernels, dropout included, tensor cores
# on), then each build's attention rows at the GPT step's shape and the GPT step,
# alternating, then PyTorch's SDPA rows with the same dropout.
# Carry .device/{gl,gpu-env.sh,bin/{bench_transformer-base,bench_transformer-new,suite}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bench_transformer-base bench_transformer-new suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
timeout 240 ~/suite attention tensor_cores dropout 2>&1 | tail -15 | tee "$o/tests.txt"
for round in 1 2; do
  for b in bench_transformer-base bench_transformer-new; do
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/$b --attention-only --lengths 64x256,8x1024 --attention-dropout 0.2 2>&1 | tee "$o/$b-attention-$round.txt" | grep -v "^    "
    VOLTA_BENCH_KERNELS=1 timeout 150 ~/$b --step-only 2>&1 | tee "$o/$b-step-$round.txt" | grep -v "^    " | grep -v "one step"
  done
done
date -u
