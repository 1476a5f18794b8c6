#!/usr/bin/env bash
# Dropout's numbers drawn in the kernels that read them (new) against HEAD
# (head): the step in f32 and half precision, alternating, with kernel profiles
# and peak memory.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-head bt-new; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for round in 1 2; do
  for b in bt-head bt-new; do
    for prec in full half; do
      echo "== $b $prec round $round"
      VOLTA_BENCH_KERNELS=1 timeout 120 ~/$b --step-only --step-precision $prec 2>&1 | tee "$o/step-$b-$prec-$round.txt" | grep -E "gpt_step|uniform|profile"
    done
  done
done
date -u
