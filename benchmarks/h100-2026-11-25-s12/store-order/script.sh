#!/usr/bin/env bash
# Session 12 probe 8 (branch probe3): odd chunks store their upper half first
# (VOLTA_X_SWAP=1), against the plain order, twice each. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
C="2,2,4,4,32,8,P;2,4,4,4,32,8,P;2,2,4,4,16,8,P;2,2,4,4,32,8,D;2,2,4,4,16,8,W"
probe() { # name, env...
  local name=$1; shift
  env "$@" timeout 120 ~/bench_gpu --probe > ~/o/$name.txt 2>&1
  echo "== $name ($*)"; grep -E "^f(16|32) n=|skip|panic|rror" ~/o/$name.txt | head -30
}
export VOLTA_PROBE_SIZES=4096,2048
probe base VOLTA_PROBE_COOP="$C"
probe swap VOLTA_X_SWAP=1 VOLTA_PROBE_COOP="$C"
probe base2 VOLTA_PROBE_COOP="$C"
probe swap2 VOLTA_X_SWAP=1 VOLTA_PROBE_COOP="$C"
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
