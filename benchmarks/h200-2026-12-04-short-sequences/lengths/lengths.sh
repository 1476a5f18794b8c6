#!/usr/bin/env bash
# Attention forward + backward at equal work (B·T² fixed: 64×256 … 1×2048),
# Volta (kernels profiled) and SDPA, in one call: what a short sequence costs
# per workgroup. Carry .device/{gl,gpu-env.sh,bin/bench_transformer.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
L=64x256,16x512,4x1024,1x2048
~/bt --step-only --step-precision half > /dev/null 2>&1   # clocks up
VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt --attention-only --lengths $L > $o/volta-1.txt 2>&1
PYTHONUNBUFFERED=1 timeout 100 python3 scripts/device/transformer_peers.py --attention-only --lengths $L > $o/torch.txt 2>&1
VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt --attention-only --lengths $L > $o/volta-2.txt 2>&1
grep -E "TFLOP|MiB|ms " $o/volta-1.txt | grep -v "calls" ; cat $o/torch.txt; grep -E "TFLOP" $o/volta-2.txt
grep -E "flash" $o/volta-2.txt
date -u
