#!/usr/bin/env bash
# `bench_gpu --first-use-probe` with nvidia-smi sampling the P-state, SM and memory
# clocks, power and throttle reasons every 100 ms (smi100.csv). Carry
# .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
O=${OUT:-/tmp}
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
nvidia-smi --query-gpu=timestamp,pstate,utilization.gpu,clocks.sm,clocks.mem,power.draw,clocks_throttle_reasons.active --format=csv -lms 100 > $O/smi100.csv 2>&1 &
SMI=$!
sleep 1
timeout 60 ~/bench_gpu --first-use-probe > $O/first-use.txt 2>&1
kill $SMI
grep -E "first|TFLOP" $O/first-use.txt | awk 'NR%3==1'
awk -F', ' 'NR>1{print $2, $4, $5, $7}' $O/smi100.csv | sort | uniq -c | sort -rn | head -12
