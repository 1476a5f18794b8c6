#!/usr/bin/env bash
# `bench_gpu --first-use-probe` twice on a fresh GPU machine: one product timed
# every 0.25 s for 12 s after its pipeline is created. Carry
# .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
O=${OUT:-/tmp}
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
ls ~/.cache/nvidia 2>&1 | head -3
timeout 60 ~/bench_gpu --first-use-probe 2>&1 | tee $O/first-use-1.txt | awk 'NR%4==1 || /first/'
echo "== second process"
timeout 60 ~/bench_gpu --first-use-probe 2>&1 | tee $O/first-use-2.txt | awk 'NR%8==1 || /first/'
ls -la ~/.cache/nvidia 2>&1 | head -5
date -u
