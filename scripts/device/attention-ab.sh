#!/usr/bin/env bash
# A/B of f32 attention variants in one call on the GPU machine, alternating, then
# PyTorch's rows (transformer_peers.py) in the same call. Variants: environment
# settings, e.g. `attention-ab.sh 2 "" "VOLTA_GPU_DISABLE=shader-float32-atomic"`
# (the backward as one launch with dq added atomically, against the two launches
# it replaces). Set STEP=1 for the GPT training step too, or ROWS to
# bench_transformer's arguments (e.g. ROWS=--step-only).
# Carry .device/{gl,gpu-env.sh,bin/bench_transformer.gz}.
set -u
rounds=${1:-2}
shift
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gunzip -c .device/bin/bench_transformer.gz > ~/bench_transformer && chmod +x ~/bench_transformer
rows=(${ROWS:---attention-only})
[ "${STEP:-}" = 1 ] && rows=()
for r in $(seq "$rounds"); do
  v=0
  for setting in "$@"; do
    v=$((v + 1))
    echo "== variant $v ($setting), round $r"
    env $setting timeout 200 ~/bench_transformer "${rows[@]}" 2>&1 | tee "${OUT:-/tmp}/v$v-$r.txt" | grep -v "^ "
  done
done
[ "${PEER:-1}" = 1 ] && PYTHONUNBUFFERED=1 timeout 200 python3 scripts/device/transformer_peers.py 2>&1 | tee "${OUT:-/tmp}/torch.txt"
