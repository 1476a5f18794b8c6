#!/usr/bin/env bash
# The f32 GEMM tile sweep (`bench_gpu --gemm-f32`) and PyTorch on the same
# shapes, with the GPU's clocks, power and throttle reasons logged every 0.5 s
# (smi.csv). Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
O=${OUT:-/tmp}
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 500 > $O/smi.csv 2>&1 &
SMI=$!
nvidia-smi --query-compute-apps=pid,name,used_memory --format=csv > $O/apps-before.csv 2>&1
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
timeout 240 ~/bench_gpu --gemm-f32 2>&1 | tee $O/gemm-f32.txt
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/device/gemm_peers.py 2>&1 | tee $O/gemm_torch.txt
kill $SMI
date -u
