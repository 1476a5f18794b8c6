#!/usr/bin/env bash
# The GPT training step, Volta and PyTorch alternating for ROUNDS rounds (3 by
# default) in one call: how far each moves within a call (PyTorch's autocast step
# is bound by its host's dispatch, so its time moves with the host).
# Carry .device/{gl,gpu-env.sh,bin/bench_transformer.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_transformer.gz > ~/bench_transformer && chmod +x ~/bench_transformer
for r in $(seq 1 "${ROUNDS:-3}"); do
  timeout 120 ~/bench_transformer --step-only 2>&1 | tee "$o/volta-$r.txt" | grep "ms "
  PYTHONUNBUFFERED=1 timeout 120 python3 scripts/device/transformer_peers.py --step-only 2>&1 | tee "$o/torch-$r.txt" | grep "ms "
done
date -u
