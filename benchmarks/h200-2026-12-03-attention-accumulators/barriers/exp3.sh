#!/usr/bin/env bash
# f16 fetches, P as f16 and the keys in registers (none), and with the barriers
# of a subgroup's own rows as subgroup barriers (sgbar): tests, rows, half step.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-exp suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for v in none sgbar; do
  VOLTA_EXP=$v timeout 150 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests-$v.txt"
done
for round in 1 2; do
  for v in none sgbar; do
    echo "== $v round $round"
    VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --attention-only --lengths 64x256,2x4096 --attention-dropout 0.2 2>&1 | tee "$o/att-$v-$round.txt" | grep "tensor-core"
    VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --step-only --step-precision half 2>&1 | tee "$o/step-$v-$round.txt" | grep -E "tensor-core backward|flash_attention tensor-core |_B64 "
  done
done
date -u
