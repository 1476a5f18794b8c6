#!/usr/bin/env bash
# The f32 one-launch attention backward with its dropout factors drawn where they
# are used (bt_drop) against HEAD, which holds the tile's 16 factors (bt_head):
# the driver's register counts (VOLTA_DUMP_WGSL, shader_stats), then the
# attention rows with dropout 0.2 and the f32 GPT step, alternating, kernel times
# listed. Carry .device/{gl,gpu-env.sh,bin/bt_head.gz,bin/bt_drop.gz,bin/shader_stats.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt_head bt_drop shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for b in bt_head bt_drop; do
  rm -rf ~/k_$b ~/a_$b && mkdir -p ~/a_$b
  VOLTA_DUMP_WGSL=~/k_$b timeout 200 ~/$b --attention-only --lengths 8x256 --attention-dropout 0.2 > /dev/null 2>&1
  cp ~/k_$b/*flash_attention_backward* ~/a_$b/ 2>/dev/null || cp ~/k_$b/*flash* ~/a_$b/
  ls ~/a_$b
  timeout 200 ~/shader_stats ~/a_$b 2>&1 | tee "$o/registers-$b.txt" | grep -i -E "register|backward|spill" | head -12
done
for r in 1 2 3; do
  for b in bt_head bt_drop; do
    echo "== $b, round $r"
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/$b --attention-only --attention-dropout 0.2 --lengths 64x256,8x1024,2x4096 2>&1 | tee "$o/attn-$b-$r.txt" | grep -E "f32.*ms|backward \(atomic"
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/$b --step-only --step-precision full 2>&1 | tee "$o/step-$b-$r.txt" | grep -E "ms  |flash"
  done
done
date -u
