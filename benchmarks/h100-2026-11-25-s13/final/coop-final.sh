#!/usr/bin/env bash
# Session 13's last call: the release test binaries that check products against the
# CPU (tensor cores, f16, every tile candidate), then f16 products on tensor cores
# with split-K as shipped, and PyTorch on the same shapes. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
for f in .device/bin/*.gz; do b=$(basename $f .gz); gunzip -c $f > ~/$b && chmod +x ~/$b; done
date -u > ~/o/dates.txt
for t in gpu_tensor_cores f16 gpu_parity; do timeout 150 ~/$t > ~/o/test-$t.txt 2>&1; echo "$t: exit $?"; grep "test result" ~/o/test-$t.txt; done
VOLTA_PROBE_SIZES=1024,2048,4096,4096x14336x512,512x4096x4096 VOLTA_PROBE_COOP=default timeout 150 ~/bench_gpu --probe > ~/o/volta.txt 2>&1
PYTHONUNBUFFERED=1 timeout 90 python3 scripts/device/gemm_peers.py > ~/o/torch.txt 2>&1
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
grep -h "^f16\|^split\|adapter" ~/o/volta.txt; grep f16 ~/o/torch.txt
