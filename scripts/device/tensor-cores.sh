#!/usr/bin/env bash
# The tensor-core tests (release test binaries) and rows (`bench_gpu
# --tensor-cores`: the f16 sweep, the defaults with their kernels profiled, f32 in
# half precision), then PyTorch on f16 (gemm_peers.py), in one call on the GPU
# machine. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
O=${OUT:-/tmp}
for f in bench_gpu test_suite; do gunzip -c .device/bin/$f.gz > ~/$f && chmod +x ~/$f; done
{ ~/test_suite gpu_tensor_cores::; ~/test_suite f16::; } 2>&1 | grep -E "^test |test result|panicked|error" | tee $O/tests.txt
timeout 200 ~/bench_gpu --tensor-cores > $O/tensor_cores.txt 2>&1
grep -E "^matmul|GPU|tensor-core|sum" $O/tensor_cores.txt | head -40
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py 2>&1 | tee $O/gemm_torch.txt | grep f16
date -u
