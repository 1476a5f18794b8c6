#!/usr/bin/env bash
# What each part of the tensor-core backward costs: the same build with parts
# removed (VOLTA_EXP; results wrong, timing only).
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-exp suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
timeout 200 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for round in 1 2; do
  for v in none noatomic nokrestage nodq noexp noatomic,nokrestage; do
    echo "== $v round $round"
    VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --attention-only --lengths 64x256,2x4096 --attention-dropout 0.2 2>&1 | tee "$o/$v-$round.txt" | grep "tensor-core backward"
  done
done
date -u
