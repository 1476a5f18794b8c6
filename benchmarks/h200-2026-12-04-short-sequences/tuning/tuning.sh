#!/usr/bin/env bash
# The f32 step with the matmul tiles tuned into an empty cache: tuning off
# (VOLTA_AUTOTUNE=0, the size-based tiles), the old tuner (candidates timed one
# after another: bt_old) and the new (every candidate timed in each of three
# rounds: bt_new), alternating, each process with its own empty cache; the
# winners each tuner kept. Carry .device/{gl,gpu-env.sh,bin/{bt_old,bt_new}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in bt_old bt_new; do gunzip -c .device/bin/$f.gz > ~/$f && chmod +x ~/$f; done
for r in 1 2; do
  for v in off old new; do
    c=$(mktemp -d)
    if [ $v = off ]; then b=~/bt_new; t=0; else b=~/bt_$v; t=1; fi
    VOLTA_CACHE_DIR=$c VOLTA_AUTOTUNE=$t VOLTA_BENCH_KERNELS=1 timeout 100 $b --step-only --step-precision full > $o/step-$v-$r.txt 2>&1
    echo "== $v round $r"; grep -E "ms |matmul$" $o/step-$v-$r.txt | head -3
    cat $c/*.txt 2>/dev/null | tee $o/cache-$v-$r.txt | head -20
  done
done
date -u
