#!/usr/bin/env bash
# When a batch may go to an idle submitting thread (session 10): bench_gpu's
# default rows with VOLTA_SUBMIT_AFTER_US at 0, 50 and 200 µs and "never" (full
# batches and sync points only), alternated in one call, then PyTorch on the
# same workloads. Outputs go into one tarball. Carry .device/{gl,gpu-env.sh,bin,torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o
date -u > ~/o/dates.txt
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 500 > ~/o/smi.csv 2>&1 &
smi=$!
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
for t in 0 50 200 1000000000; do
  VOLTA_SUBMIT_AFTER_US=$t timeout 60 ~/bench_gpu --record > ~/o/record_$t.txt 2>&1
done
for t in 1000000000 0 50 200; do
  VOLTA_SUBMIT_AFTER_US=$t timeout 120 ~/bench_gpu --defaults > ~/o/bench_$t.txt 2>&1
  date -u >> ~/o/dates.txt
done
PYTHONUNBUFFERED=1 timeout 100 python3 .device/torch_peers.py > ~/o/torch.txt 2>&1
date -u >> ~/o/dates.txt
kill $smi
tar czf "$OUT/out.tgz" -C ~/o .
