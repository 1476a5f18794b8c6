#!/usr/bin/env bash
# Session 12 probe 3 (branch probe3): two register stages (VOLTA_X_P2) against one
# across subgroup grids, at 4096² and 2048². Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
C="2,2,4,4,32,8,P;2,4,4,4,32,8,P;4,2,4,4,32,8,P;2,4,4,2,32,8,P;4,2,2,4,32,8,P;2,4,4,2,16,8,P;2,2,4,4,16,8,P;2,4,4,4,16,8,P;4,2,4,4,16,8,P;2,2,4,2,32,8,P"
probe() { # name, env...
  local name=$1; shift
  env "$@" timeout 120 ~/bench_gpu --probe > ~/o/$name.txt 2>&1
  echo "== $name ($*)"; grep -E "^f(16|32) n=" ~/o/$name.txt
}
export VOLTA_PROBE_SIZES=4096,2048
probe p1 VOLTA_PROBE_COOP="$C"
probe p2 VOLTA_X_P2=1 VOLTA_PROBE_COOP="$C"
probe p2swz VOLTA_X_P2=1 VOLTA_X_SWZ=16 VOLTA_PROBE_COOP="$C"
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
