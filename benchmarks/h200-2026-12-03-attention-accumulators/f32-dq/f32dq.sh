#!/usr/bin/env bash
# The f32 one-launch backward reading dS where it was stored (new) against
# HEAD (head): the GPU tests of attention, register counts, the f32 attention
# rows and the f32 step, alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-head bt-new suite shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 150 ~/suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for b in bt-head bt-new; do
  rm -rf ~/k-$b ~/a-$b && mkdir -p ~/a-$b
  VOLTA_DUMP_WGSL=~/k-$b timeout 100 ~/$b --attention-only --lengths 2x256 > /dev/null 2>&1
  cp ~/k-$b/*flash_attention_backward* ~/a-$b/ 2>/dev/null
  timeout 60 ~/shader_stats ~/a-$b 2>&1 | sed 's/Binary_Size.*Local/Local/' | tee "$o/regs-$b.txt"
done
for round in 1 2; do
  for b in bt-head bt-new; do
    echo "== $b round $round"
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/$b --attention-only --lengths 64x256,8x1024,2x4096 --attention-dropout 0.2 2>&1 | tee "$o/att-$b-$round.txt" | grep -E "_f32_|flash_attention (backward|forward)"
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/$b --step-only --step-precision full 2>&1 | tee "$o/step-$b-$round.txt" | grep -E "flash_attention|_B64 "
  done
done
date -u
