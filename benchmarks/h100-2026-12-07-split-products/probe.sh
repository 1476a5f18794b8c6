#!/usr/bin/env bash
# The split kernel's follow-up (split-kernel.patch applied, bench_transformer and
# the release suite built into .device/bin): accuracy with the accumulators in
# the tensor cores (RZ) and per step (RN), then the step's products with the
# scan and without it (scales of 1).
set -u
source .device/gpu-env.sh >/dev/null
date -u
for b in bench_transformer test_suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
for rn in 0 1; do
  echo "== accuracy, VOLTA_EXP_SPLIT_RN=$rn"
  env $( [ $rn = 1 ] && echo VOLTA_EXP_SPLIT_RN=1 ) NOASSERT=1 timeout 60 \
    ~/test_suite split_precision --nocapture 2>&1 | grep -E "split |result"
done | tee "$OUT/accuracy.txt"
for cfg in "" "VOLTA_EXP_SPLIT_NOSCAN=1"; do
  echo "== split ${cfg:-(as built)}"
  env $cfg timeout 60 ~/bench_transformer --products split 2>&1 | grep product_ | grep -v along_k
done | tee "$OUT/probe.txt"
echo "== full"
timeout 60 ~/bench_transformer --products full 2>&1 | grep product_ | grep -v along_k | tee "$OUT/full.txt"
