#!/usr/bin/env bash
# Session 12 probe 4 (branch probe3): where the f32 kernel's time goes
# (VOLTA_X_NOLOAD=1 no global fetches, 2 no shared stores either; results wrong).
# Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
F="128,128,8,16,8,P,8;128,128,8,16,8,D,8;128,128,16,16,8,W,8;256,128,8,16,8,P,8;128,128,8,8,8,P,8;64,128,8,8,8,P,8"
probe() { # name, env...
  local name=$1; shift
  env "$@" timeout 120 ~/bench_gpu --probe > ~/o/$name.txt 2>&1
  echo "== $name ($*)"; grep -E "^f(16|32) n=|skip" ~/o/$name.txt
}
export VOLTA_PROBE_SIZES=4096,2048
probe base VOLTA_PROBE_F32="$F"
probe noload1 VOLTA_X_NOLOAD=1 VOLTA_PROBE_F32="$F"
probe noload2 VOLTA_X_NOLOAD=2 VOLTA_PROBE_F32="$F"
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
