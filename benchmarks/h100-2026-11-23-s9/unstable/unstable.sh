#!/usr/bin/env bash
# Looks for the unstable rows: `bench_gpu --train` and `--gemm --defaults`, twice
# each in one call, with the GPU's clocks logged; each row notes the share of
# its runs spent recording. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
O=${OUT:-/tmp}
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
for i in 1 2; do
  timeout 120 ~/bench_gpu --train > $O/train-$i.txt 2>&1
  timeout 150 ~/bench_gpu --gemm --defaults > $O/gemm-defaults-$i.txt 2>&1
done
grep -hE "^(mlp|cnn|matmul)" $O/train-*.txt $O/gemm-defaults-*.txt | grep -v "^matmul_mlp\|batched" 
kill $SMI
date -u
