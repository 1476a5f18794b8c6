#!/usr/bin/env bash
# f16 products with split-K on and off (tensor cores), PyTorch in the same call.
# Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
export VOLTA_PROBE_SIZES=1024,2048,4096,4096x14336x512,512x4096x4096 VOLTA_PROBE_COOP=default
for s in 1 0; do VOLTA_PROBE_SPLIT=$s timeout 150 ~/bench_gpu --probe > ~/o/volta-split$s.txt 2>&1; done
PYTHONUNBUFFERED=1 timeout 90 python3 scripts/device/gemm_peers.py > ~/o/torch.txt 2>&1
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
grep -h "^f16\|^split" ~/o/volta-split*.txt; grep f16 ~/o/torch.txt
