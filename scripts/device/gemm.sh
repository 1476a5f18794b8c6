#!/usr/bin/env bash
# The GEMM figures of issue 12 in one call on the GPU machine: bench_gpu --gemm
# (f32 tile sweep, the training steps' product shapes, the tensor-core f16 sweep
# and f32 in half precision), PyTorch on the same workloads, then the row kernels
# (--rows) beside PyTorch's. Carry .device/{gl,gpu-env.sh,bin,torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
timeout 300 ~/bench_gpu --gemm 2>&1 | tee "${OUT:-/tmp}/gemm.txt"
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/device/gemm_peers.py 2>&1 | tee "${OUT:-/tmp}/gemm_torch.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 .device/torch_peers.py 2>&1 | tee "${OUT:-/tmp}/torch.txt"
timeout 60 ~/bench_gpu --rows 2>&1 | tee "${OUT:-/tmp}/rows.txt"
