#!/usr/bin/env bash
# The transformer rows in one call on the GPU machine: bench_transformer (fused
# attention forward + backward, its memory against T, nanoGPT's shakespeare-char
# training step in f32 and half precision, the step's kernel profile), then
# transformer_peers.py (PyTorch SDPA and eager nanoGPT, same rows), then
# bench_transformer again. PyTorch's step is profiled by torch.profiler after
# its rows. Carry .device/{gl,gpu-env.sh,bin/bench_transformer.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gunzip -c .device/bin/bench_transformer.gz > ~/bench_transformer && chmod +x ~/bench_transformer
timeout 200 ~/bench_transformer 2>&1 | tee "${OUT:-/tmp}/volta-1.txt"
PYTHONUNBUFFERED=1 timeout 200 python3 scripts/device/transformer_peers.py --profile-step 2>&1 | tee "${OUT:-/tmp}/torch.txt"
timeout 200 ~/bench_transformer 2>&1 | tee "${OUT:-/tmp}/volta-2.txt"
