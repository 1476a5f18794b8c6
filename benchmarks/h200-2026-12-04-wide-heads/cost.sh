#!/usr/bin/env bash
# What the slices cost heads of up to 256 features: main before them (bt_old,
# dcea379), with them reading the slice's first feature from the parameters in
# every load and store (bt_head), and with that read folded away for such heads
# (bt_const), alternating: f32 attention rows with dropout 0.2 and the f32 step,
# kernel times listed. Carry .device/{gl,gpu-env.sh,bin/{bt_old,bt_head,bt_const}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt_old bt_head bt_const; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for r in 1 2 3; do
  for b in bt_old bt_head bt_const; do
    echo "== $b, round $r"
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/$b --attention-only --attention-dropout 0.2 --lengths 64x256,8x1024,2x4096 2>&1 > "$o/attn-$b-$r.txt"
    grep -A1 "fwd_bwd_f32" "$o/attn-$b-$r.txt" | grep -E "f32|backward \(atomic" | tr '\n' ' '; echo
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/$b --step-only --step-precision full 2>&1 > "$o/step-$b-$r.txt"
    grep -E "Full_B64 |flash_attention" "$o/step-$b-$r.txt" | tr '\n' ' '; echo
  done
done
date -u
