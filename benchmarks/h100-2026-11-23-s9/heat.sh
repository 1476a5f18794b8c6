#!/usr/bin/env bash
# The rows that came out slow in a machine's first process: `bench_gpu --gemm
# --defaults` then `--train` on a fresh machine, with nvidia-smi sampling clocks
# every 100 ms (smi100.csv). Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
O=${OUT:-/tmp}
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
nvidia-smi --query-gpu=timestamp,pstate,utilization.gpu,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 100 > $O/smi100.csv 2>&1 &
SMI=$!
timeout 240 ~/bench_gpu --gemm --defaults > $O/gemm-defaults.txt 2>&1
timeout 120 ~/bench_gpu --train > $O/train.txt 2>&1
kill $SMI
grep -hE "^(matmul_f|mlp_train_step_b|cnn_train_step_b)" $O/gemm-defaults.txt $O/train.txt | sort -u
awk -F', ' 'NR>1{print $4}' $O/smi100.csv | sort | uniq -c | sort -rn | head -5
date -u
