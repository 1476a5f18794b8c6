#!/usr/bin/env bash
# Session 12 probe 5 (branch probe3): tensor-core fragments loaded straight from
# global memory (VOLTA_X_GLOBAL=1 with Direct staging), no shared memory.
# Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
C="2,2,4,4,16,0,D;2,4,4,4,16,0,D;4,4,2,2,16,0,D;2,2,4,2,16,0,D;4,2,2,4,16,0,D;1,1,4,4,16,0,D;2,2,2,2,16,0,D;1,2,4,4,16,0,D"
probe() { # name, env...
  local name=$1; shift
  env "$@" timeout 120 ~/bench_gpu --probe > ~/o/$name.txt 2>&1
  echo "== $name ($*)"; grep -E "^f(16|32) n=|skip|panic|rror" ~/o/$name.txt | head -30
}
export VOLTA_PROBE_SIZES=4096,2048
probe base VOLTA_PROBE_COOP="2,2,4,4,32,8,P"
probe global VOLTA_X_GLOBAL=1 VOLTA_PROBE_COOP="$C"
probe globalswz VOLTA_X_GLOBAL=1 VOLTA_X_SWZ=8 VOLTA_PROBE_COOP="$C"
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
