#!/usr/bin/env bash
# The tensor-core backward's products into accumulators split in quadrants
# (VOLTA_EXP_BQ=1) against 16 rows a subgroup: GPU tests with the split,
# registers, attention rows and the half step, alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-bq suite shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
VOLTA_EXP_BQ=1 timeout 150 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for q in 0 1; do
  rm -rf ~/k ~/a && mkdir -p ~/a
  if [ $q = 1 ]; then export VOLTA_EXP_BQ=1; else unset VOLTA_EXP_BQ; fi
  VOLTA_DUMP_WGSL=~/k timeout 100 ~/bt-bq --attention-only --lengths 2x256 > /dev/null 2>&1
  cp ~/k/*tensor-core* ~/a/ 2>/dev/null
  timeout 60 ~/shader_stats ~/a 2>&1 | sed 's/Binary_Size.*Local/Local/' | tee "$o/regs-$q.txt"
done
for round in 1 2; do
  for q in 0 1; do
    if [ $q = 1 ]; then export VOLTA_EXP_BQ=1; else unset VOLTA_EXP_BQ; fi
    echo "== bq $q round $round"
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-bq --attention-only --lengths 64x256,8x1024,2x4096 2>&1 | tee "$o/att-$q-$round.txt" | grep -E "backward|_half_"
  done
done
for q in 0 1; do
  if [ $q = 1 ]; then export VOLTA_EXP_BQ=1; else unset VOLTA_EXP_BQ; fi
  VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-bq --step-only --step-precision half 2>&1 | tee "$o/step-$q.txt" | grep -E "backward|_B64 "
done
date -u
