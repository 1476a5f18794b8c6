#!/usr/bin/env bash
# The f32 attention kernels under the default plan (forward 16 KiB, backward
# 24 KiB) and under WebGPU's 16 KiB for both (--attention-workgroup-bytes),
# alternating, attention rows and the f32 step. Carry .device/{gl,gpu-env.sh,bin/bt_main.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
gunzip -c .device/bin/bt_main.gz > ~/bt && chmod +x ~/bt
for r in 1 2; do
  for cap in default 16384; do
    args=()
    [ "$cap" = default ] || args=(--attention-workgroup-bytes "$cap")
    echo "== $cap, round $r"
    timeout 120 ~/bt --attention-only --lengths 8x1024,2x4096,64x256 "${args[@]}" 2>&1 | tee "$o/attn-$cap-$r.txt" | grep "f32.*ms "
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/bt --step-only --step-precision full "${args[@]}" 2>&1 | tee "$o/step-$cap-$r.txt" | grep "ms \|flash"
  done
done
date -u
