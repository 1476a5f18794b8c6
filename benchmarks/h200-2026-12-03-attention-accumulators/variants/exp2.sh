#!/usr/bin/env bash
# Backward variants (VOLTA_EXP): P kept as f16, the keys kept in registers for
# dq's restaging; the attention rows (dropout 0.2) and the half step.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
gunzip -c .device/bin/bt-exp.gz > ~/bt-exp && chmod +x ~/bt-exp
for round in 1 2; do
  for v in none prhalf kregs prhalf,kregs pf:prhalf,kregs; do
    echo "== $v round $round"
    pf=0; case $v in pf:*) pf=1; v=${v#pf:};; esac
    VOLTA_ATTENTION_PREFETCH=$pf VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --attention-only --lengths 64x256,2x4096 --attention-dropout 0.2 2>&1 | tee "$o/att-$pf-${v/,/+}-$round.txt" | grep "tensor-core"
    VOLTA_ATTENTION_PREFETCH=$pf VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --step-only --step-precision half 2>&1 | tee "$o/step-$pf-${v/,/+}-$round.txt" | grep -E "tensor-core backward|flash_attention tensor-core |_B64 "
  done
done
date -u
