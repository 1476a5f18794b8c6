#!/usr/bin/env bash
# When a batch may go to an idle submitting thread (session 10): bench_gpu's
# recording rows (twice), training steps and f32 products with
# VOLTA_SUBMIT_AFTER_US at 0, 50, 200 and 1000 µs and "never" (full batches and
# sync points only), alternated in one call. Outputs go into one tarball.
# Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o
date -u > ~/o/dates.txt
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 500 > ~/o/smi.csv 2>&1 &
smi=$!
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
for mode in record train record gemm-f32; do
  for t in 1000000000 0 50 200 1000; do
    VOLTA_SUBMIT_AFTER_US=$t timeout 45 ~/bench_gpu --$mode >> ~/o/${mode}_$t.txt 2>&1
  done
  date -u >> ~/o/dates.txt
done
kill $smi
tar czf "$OUT/out.tgz" -C ~/o .
