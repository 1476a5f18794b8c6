#!/usr/bin/env bash
# probe2 branch: the large f32 tiles at 2048/4096 with K split 1, 2 and 4 ways
# (VOLTA_X_SPLIT). Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
F32="128,128,8,16,8,P,8;128,128,8,16,8,W,0;256,128,8,16,8,P,8;64,128,8,8,16,P,8"
for s in 1 2 4; do
  echo "== split $s"
  VOLTA_X_SPLIT=$s VOLTA_PROBE_F32="$F32" timeout 120 ~/bench_gpu --probe 2>&1 | grep -v "^adapter" | tee ~/o/split$s.txt
done
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py 2>&1 | grep f32_ | tee ~/o/gemm_torch.txt
tar czf $OUT/out.tgz -C ~/o .
