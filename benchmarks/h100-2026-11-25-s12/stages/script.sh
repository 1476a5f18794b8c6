#!/usr/bin/env bash
# Session 12 probe 2 (branch probe3): where the tensor-core kernel's time goes.
# VOLTA_X_NOLOAD=1 drops the global fetches, 2 also the shared stores, 3 also the
# fragment loads (fragments loaded once before the loop): results are wrong, the
# times bound what each stage costs. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
date -u > ~/o/dates.txt
C="2,2,4,4,32,8,P;2,4,4,4,32,8,P;2,2,4,4,16,8,P;2,2,4,2,32,8,P;4,4,2,2,32,8,P"
probe() { # name, env...
  local name=$1; shift
  env "$@" timeout 100 ~/bench_gpu --probe > ~/o/$name.txt 2>&1
  echo "== $name ($*)"; grep -E "^f(16|32) n=" ~/o/$name.txt
}
export VOLTA_PROBE_SIZES=4096
probe base VOLTA_PROBE_COOP="$C"
probe noload1 VOLTA_X_NOLOAD=1 VOLTA_PROBE_COOP="$C"
probe noload2 VOLTA_X_NOLOAD=2 VOLTA_PROBE_COOP="$C"
probe noload3 VOLTA_X_NOLOAD=3 VOLTA_PROBE_COOP="$C"
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
