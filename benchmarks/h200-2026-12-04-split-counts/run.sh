#!/usr/bin/env bash
# The f32 weight gradients (K = 16384 tokens, split-K) at forced split counts
# (VOLTA_EXP_SPLIT, a temporary switch of this build) against split_k's choice:
# bench_transformer --products full, two rounds. Carry .device/{gl,gpu-env.sh,bin/bt_split.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
gunzip -c .device/bin/bt_split.gz > ~/bt && chmod +x ~/bt
for r in 1 2; do
  for s in default 4 8 16 32 64; do
    echo "== split $s, round $r"
    if [ $s = default ]; then
      timeout 120 ~/bt --products full 2>&1 | tee "$o/products-$s-$r.txt" | grep "dw_"
    else
      VOLTA_EXP_SPLIT=$s timeout 120 ~/bt --products full 2>&1 | tee "$o/products-$s-$r.txt" | grep "dw_"
    fi
  done
done
date -u
