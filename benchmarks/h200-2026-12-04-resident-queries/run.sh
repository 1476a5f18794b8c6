#!/usr/bin/env bash
# The f32 attention forward with its queries resident in workgroup memory
# (VOLTA_ATTENTION_RESIDENT=bytes, a temporary switch) against the chunked plan
# at its default and at larger budgets (VOLTA_ATTENTION_BYTES), alternating.
# Carry .device/{gl,gpu-env.sh,bin/bt_res.gz,bin/suite.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
gunzip -c .device/bin/bt_res.gz > ~/bt && chmod +x ~/bt
gunzip -c .device/bin/suite.gz > ~/suite && chmod +x ~/suite
VOLTA_ATTENTION_RESIDENT=49152 timeout 120 ~/suite attention_gpu 2>&1 | tail -3
VOLTA_ATTENTION_RESIDENT=32768 timeout 120 ~/suite attention_gpu 2>&1 | tail -3
rows="--attention-only --lengths 8x1024,2x4096,64x256"
for r in 1 2; do
  for v in "" "VOLTA_ATTENTION_RESIDENT=49152" "VOLTA_ATTENTION_RESIDENT=32768" "VOLTA_ATTENTION_BYTES=49152"; do
    echo "== ${v:-default}, round $r"
    env $v timeout 120 ~/bt $rows 2>&1 | tee "$o/${v:-default}-$r.txt" | grep "ms "
  done
done
date -u
