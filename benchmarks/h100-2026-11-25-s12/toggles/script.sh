#!/usr/bin/env bash
# Session 12 probe (branch probe3): tensor-core kernel toggles read from the
# environment at source generation (VOLTA_X_P2 two register stages, VOLTA_X_FRAG
# B fragments interleaved with the multiplies, VOLTA_X_H8 16-byte f16 loads without
# unpacking, VOLTA_X_SWZ grouped tile order), each in its own process, then PyTorch.
# Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
C="2,2,4,4,32,8,P;2,4,4,4,16,8,P;4,2,4,4,16,8,P;2,2,4,4,16,8,P"
F="128,128,8,16,8,P,8"
probe() { # name, env...
  local name=$1; shift
  env "$@" timeout 100 ~/bench_gpu --probe > ~/o/$name.txt 2>&1
  echo "== $name ($*)"; grep -E "^f(16|32) n=" ~/o/$name.txt
}
export VOLTA_PROBE_SIZES=4096,2048
probe base VOLTA_PROBE_COOP="$C" VOLTA_PROBE_F32="$F"
probe p2 VOLTA_X_P2=1 VOLTA_PROBE_COOP="$C"
probe frag VOLTA_X_FRAG=1 VOLTA_PROBE_COOP="$C"
probe h8 VOLTA_X_H8=1 VOLTA_PROBE_COOP="$C"
probe swz8 VOLTA_X_SWZ=8 VOLTA_PROBE_COOP="2,2,4,4,32,8,P" VOLTA_PROBE_F32="$F"
probe swz16 VOLTA_X_SWZ=16 VOLTA_PROBE_COOP="2,2,4,4,32,8,P" VOLTA_PROBE_F32="$F"
probe swz4 VOLTA_X_SWZ=4 VOLTA_PROBE_F32="$F"
probe all VOLTA_X_P2=1 VOLTA_X_FRAG=1 VOLTA_X_H8=1 VOLTA_PROBE_COOP="$C"
probe base2 VOLTA_PROBE_COOP="2,2,4,4,32,8,P" VOLTA_PROBE_F32="$F"
date -u >> ~/o/dates.txt
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py > ~/o/gemm_torch.txt 2>&1
tail -8 ~/o/gemm_torch.txt
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
