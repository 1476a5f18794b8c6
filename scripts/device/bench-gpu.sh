#!/usr/bin/env bash
# bench_gpu and PyTorch's figures for the same workloads in one call on the GPU
# machine (issue 12's table), then the language-model rows on a placeholder-weight
# GGUF. Carry .device/{gl,gpu-env.sh,bin,sk,torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bench_gpu bench_llm; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
timeout 240 ~/bench_gpu 2>&1 | tee "${OUT:-/tmp}/bench_gpu.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 .device/torch_peers.py 2>&1 | tee "${OUT:-/tmp}/torch.txt"
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
~/bench_llm --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5 2>&1 | tee "${OUT:-/tmp}/llm.txt"
