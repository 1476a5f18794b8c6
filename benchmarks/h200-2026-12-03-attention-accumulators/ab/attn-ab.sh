#!/usr/bin/env bash
# Tensor-core attention, before and after: the GPU tests of attention, then each
# build's attention rows and half step, alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-base bt-new suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
timeout 200 ~/suite attention tensor_cores 2>&1 | tail -12 | tee "$o/tests.txt"
for round in 1 2; do
  for b in bt-base bt-new; do
    echo "== $b round $round"
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/$b --attention-only --lengths 64x256,8x1024,2x4096 2>&1 | tee "$o/$b-att-$round.txt" | grep -v "^    "
    VOLTA_BENCH_KERNELS=1 timeout 150 ~/$b --step-only --step-precision half 2>&1 | tee "$o/$b-step-$round.txt" | grep -v "^    " | grep -v "one step"
  done
done
date -u
