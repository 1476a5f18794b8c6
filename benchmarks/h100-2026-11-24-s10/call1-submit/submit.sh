#!/usr/bin/env bash
# The submitting thread (session 10): session 9's bench_gpu (bench_gpu_s9, batches
# submitted inline at sync points) against today's, alternated in one call, on
# recording, row kernels and the default rows; PyTorch on the same workloads; the
# GPU test binaries that exercise batching, threads and training steps.
# Carry .device/{gl,gpu-env.sh,bin,torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
smi=$!
for f in .device/bin/*.gz; do
  b=$(basename $f .gz); gunzip -c $f > ~/$b && chmod +x ~/$b
done
for t in gpu_parity optim_gpu data layers_gpu; do
  ~/test_$t --test-threads=1 2>&1 | grep -E "^test .*(FAILED|panicked)|test result" | sed "s/^/$t: /"
done | tee "$OUT/tests.txt"
for i in 1 2; do
  timeout 60 ~/bench_gpu_s9 --record > "$OUT/record_s9_$i.txt" 2>&1
  timeout 60 ~/bench_gpu --record > "$OUT/record_$i.txt" 2>&1
done
timeout 90 ~/bench_gpu_s9 --rows > "$OUT/rows_s9.txt" 2>&1
timeout 90 ~/bench_gpu --rows > "$OUT/rows.txt" 2>&1
timeout 200 ~/bench_gpu --defaults > "$OUT/bench_gpu.txt" 2>&1
timeout 200 ~/bench_gpu_s9 --defaults > "$OUT/bench_gpu_s9.txt" 2>&1
PYTHONUNBUFFERED=1 timeout 100 python3 .device/torch_peers.py > "$OUT/torch.txt" 2>&1
date -u
kill $smi
