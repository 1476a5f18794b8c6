#!/usr/bin/env bash
# Issue 12's figures in one call on the GPU machine: bench_gpu with its default
# choices, the recording rows twice more, and PyTorch on the same workloads
# (torch_peers.py, gemm_peers.py). The GPU's clocks, power and throttle reasons
# are logged every 0.5 s meanwhile (smi.csv). Outputs go into one tarball (a call
# returns at most 8 files). The test binaries and the language-model rows are
# tests-llm.sh's. Carry .device/{gl,gpu-env.sh,bin,torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
date -u > ~/o/dates.txt
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 500 > ~/o/smi.csv 2>&1 &
smi=$!
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
timeout 330 ~/bench_gpu --defaults > ~/o/bench_gpu.txt 2>&1
date -u >> ~/o/dates.txt
for i in 1 2; do timeout 60 ~/bench_gpu --record > ~/o/record_$i.txt 2>&1; done
PYTHONUNBUFFERED=1 timeout 150 python3 .device/torch_peers.py > ~/o/torch.txt 2>&1
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py > ~/o/gemm_torch.txt 2>&1
date -u >> ~/o/dates.txt
kill $smi
tar czf "$OUT/out.tgz" -C ~/o .
