#!/usr/bin/env bash
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt suite shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 150 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
rm -rf ~/k ~/a && mkdir -p ~/a
VOLTA_DUMP_WGSL=~/k timeout 100 ~/bt --attention-only --lengths 2x256 > /dev/null 2>&1
cp ~/k/*flash_attention_tensor-core-* ~/a/ 2>/dev/null
timeout 60 ~/shader_stats ~/a 2>&1 | sed 's/Binary_Size.*Local/Local/' | tee "$o/regs-new.txt"
for round in 1 2; do
  for q in 0 1; do
    echo "== quads $q round $round"
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt --attention-only --lengths 64x256,8x1024,2x4096 2>&1 | tee "$o/att-$q-$round.txt" | grep -E "flash_attention tensor-core$|_half_"
  done
done
for q in 0 1; do
  VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt --step-only --step-precision half 2>&1 | tee "$o/step-$q.txt" | grep -E "flash_attention tensor-core$|_B64 "
done
date -u
