#!/usr/bin/env bash
# The tensor-core forward with fewer values held across its tile loop (none),
# and also its scores read twice rather than held (nosr): tests, registers,
# attention rows and the half step, two rounds alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-exp suite shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 150 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for v in none nosr; do
  rm -rf ~/k-$v ~/a-$v && mkdir -p ~/a-$v
  VOLTA_EXP=$v VOLTA_DUMP_WGSL=~/k-$v timeout 100 ~/bt-exp --attention-only --lengths 2x256 > /dev/null 2>&1
  cp ~/k-$v/*flash_attention_tensor-core-* ~/a-$v/ 2>/dev/null
  timeout 60 ~/shader_stats ~/a-$v 2>&1 | sed 's/Binary_Size.*Local/Local/' | tee "$o/regs-$v.txt"
done
for round in 1 2; do
  for v in none nosr; do
    echo "== $v round $round"
    VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --attention-only --lengths 64x256,8x1024,2x4096 2>&1 | tee "$o/att-$v-$round.txt" | grep -E "flash_attention tensor-core$"
    VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --step-only --step-precision half 2>&1 | tee "$o/step-$v-$round.txt" | grep -E "flash_attention tensor-core$|_B64 "
  done
done
date -u
