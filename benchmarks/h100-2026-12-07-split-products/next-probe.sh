#!/usr/bin/env bash
# The two probes for the K-independent part of the tensor-core products (see the
# README's last section), not yet run. Build main with store-cs.patch applied:
# bench_transformer as .device/bin/bt_store.gz and bench_gpu as
# .device/bin/bench_gpu.gz (strip, gzip -9); carry .device/{bin,gpu-env.sh,gl}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in bt_store bench_gpu; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
# f32 results stored straight from the accumulators (0) or through workgroup memory (1).
for r in 1 2; do
  for cs in 0 1; do
    echo "== round $r, through workgroup memory: $cs"
    env $( [ $cs = 1 ] && echo VOLTA_EXP_STORE_CS=1 ) timeout 60 ~/bt_store --products half 2>&1 \
      | grep product_ | grep -v along_k
  done
done | tee "$OUT/stores.txt"
# How a product's time grows with K at 16,384 rows, f16 results, K never split.
VOLTA_PROBE_SPLIT=0 VOLTA_PROBE_COOP=default \
  VOLTA_PROBE_SIZES=16384x384x1536,16384x768x1536,16384x1536x1536,16384x3072x1536,16384x384x384,16384x1536x384,16384x6144x384 \
  timeout 120 ~/bench_gpu --probe 2>&1 | grep -E "^f16|split" | tee "$OUT/k-sweep.txt"
