#!/usr/bin/env bash
# The f16 GEMM against two peers on the same GPU, in one call: PyTorch (cuBLAS) and
# llama.cpp's Vulkan backend (hand-written GLSL over the same VK_KHR_cooperative_matrix
# that WGSL reaches, and over NVIDIA's VK_NV_cooperative_matrix2 where the driver has
# it), on squares and on llama.cpp's perf shape 4096×14336×512.
# Carry .device/{gl,gpu-env.sh,bin,llama}; test-backend-ops is built from llama.cpp's
# source with tests on (README.md beside this script says how).
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
gunzip -c .device/llama/bin/test-backend-ops.gz > ~/tbo && chmod +x ~/tbo
date -u > ~/o/dates.txt
VOLTA_PROBE_SIZES=2048,4096,4096x14336x512 VOLTA_PROBE_COOP=default timeout 150 ~/bench_gpu --probe > ~/o/volta.txt 2>&1
filter='type_a=f16,type_b=f(16|32),m=(4096|2048),n=(4096|2048|512),'
timeout 120 ~/tbo perf -o MUL_MAT -b Vulkan0 -p "$filter" > ~/o/llama-default.txt 2>&1
GGML_VK_DISABLE_COOPMAT2=1 timeout 120 ~/tbo perf -o MUL_MAT -b Vulkan0 -p "$filter" > ~/o/llama-coopmat1.txt 2>&1
GGML_VK_DISABLE_COOPMAT2=1 GGML_VK_DISABLE_COOPMAT=1 timeout 120 ~/tbo perf -o MUL_MAT -b Vulkan0 -p "$filter" > ~/o/llama-no-coopmat.txt 2>&1
PYTHONUNBUFFERED=1 timeout 90 python3 scripts/device/gemm_peers.py > ~/o/torch.txt 2>&1
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
grep -h "^f16\|adapter" ~/o/volta.txt
for f in default coopmat1 no-coopmat; do echo "== llama.cpp $f"; grep -hi "coopmat\|MUL_MAT" ~/o/llama-$f.txt | cut -c1-200; done
grep f16 ~/o/torch.txt
