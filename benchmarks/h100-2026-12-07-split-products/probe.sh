#!/usr/bin/env bash
# The split kernel's follow-up (split-kernel.patch applied, bench_transformer and
# the release suite built into .device/bin): accuracy with the accumulators in
# the tensor cores (RZ) and per step (RN), then the step's products with the
# scan, without it (scales of 1), and per-step accumulation.
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
for cfg in "" "VOLTA_EXP_SPLIT_NOSCAN=1" "VOLTA_EXP_SPLIT_RN=1" "VOLTA_EXP_SPLIT_NOSCAN=1 VOLTA_EXP_SPLIT_RN=1"; do
  echo "== split ${cfg:-(as built)}"
  env $cfg timeout 60 ~/bench_transformer --products split 2>&1 | grep product_ | grep -v along_k
done | tee "$OUT/probe.txt"
echo "== full"
timeout 60 ~/bench_transformer --products full 2>&1 | grep product_ | grep -v along_k | tee "$OUT/full.txt"
# A side question: how a tensor-core product's time grows with K at the step's
# 16,384 rows (f16 operands and result, default tiles, K never split).
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
echo "== K sweep"
VOLTA_PROBE_SPLIT=0 VOLTA_PROBE_COOP=default \
  VOLTA_PROBE_SIZES=16384x384x1536,16384x768x1536,16384x1536x1536,16384x3072x1536,16384x384x384,16384x1536x384,16384x6144x384 \
  timeout 90 ~/bench_gpu --probe 2>&1 | grep -E "^f16|split" | tee "$OUT/k-sweep.txt"
