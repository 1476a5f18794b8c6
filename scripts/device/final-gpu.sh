#!/usr/bin/env bash
# Issue 12's figures in one call on the GPU machine: the tensor-core tests (release
# test binaries), bench_gpu with its default choices, the tensor-core sweep,
# PyTorch on the same workloads (torch_peers.py, gemm_peers.py) and the
# language-model rows on a placeholder-weight GGUF. The GPU's clocks, power and
# throttle reasons are logged every 0.5 s meanwhile (smi.csv).
# Carry .device/{gl,gpu-env.sh,bin,sk,torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
smi=$!
for f in bench_gpu bench_llm test_f16 test_gpu_tensor_cores; do
  gunzip -c .device/bin/$f.gz > ~/$f && chmod +x ~/$f
done
{ ~/test_gpu_tensor_cores; ~/test_f16 --test-threads=1; } 2>&1 | grep -E "^test |test result" | tee "$OUT/tests.txt"
timeout 300 ~/bench_gpu --defaults > "$OUT/bench_gpu.txt" 2>&1
timeout 60 ~/bench_gpu --record > "$OUT/record.txt" 2>&1
timeout 200 ~/bench_gpu --tensor-cores > "$OUT/tensor_cores.txt" 2>&1
PYTHONUNBUFFERED=1 timeout 150 python3 .device/torch_peers.py > "$OUT/torch.txt" 2>&1
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py > "$OUT/gemm_torch.txt" 2>&1
python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
timeout 60 ~/bench_llm --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5 > "$OUT/llm.txt" 2>&1
date -u
kill $smi
