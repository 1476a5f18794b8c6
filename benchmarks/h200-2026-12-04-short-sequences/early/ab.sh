#!/usr/bin/env bash
# The tensor-core attention loading its first tiles together (queries with the
# first keys and values in the forward; keys and values at once in the
# backward, dq's keys rounded from the same loads): VOLTA_ATTENTION_EARLY=1
# against 0. The attention tests with the knob on, then attention rows at equal
# work and the half step, alternating. Carry .device/{gl,gpu-env.sh,bin/{bench_transformer,test_suite}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in bench_transformer test_suite; do gunzip -c .device/bin/$f.gz > ~/$f && chmod +x ~/$f; done
VOLTA_ATTENTION_EARLY=1 ~/test_suite attention 2>&1 | grep -E "^test |test result|panicked" | tee $o/tests.txt
~/bench_transformer --step-only --step-precision half > /dev/null 2>&1   # clocks up
L=64x256,8x1024,2x4096
for r in 1 2; do
  for knob in 0 1; do
    VOLTA_ATTENTION_EARLY=$knob VOLTA_BENCH_KERNELS=1 timeout 100 ~/bench_transformer --attention-only --lengths $L > $o/att-$knob-$r.txt 2>&1
    echo "== attention early=$knob round $r"; grep -E "TFLOP|flash" $o/att-$knob-$r.txt | grep -v "f32_B\|fwd_f32\| forward\|backward (atomic"
  done
  for knob in 0 1; do
    VOLTA_ATTENTION_EARLY=$knob VOLTA_BENCH_KERNELS=1 timeout 100 ~/bench_transformer --step-only --step-precision half > $o/step-$knob-$r.txt 2>&1
    echo "== step early=$knob round $r"; grep -E "ms |flash" $o/step-$knob-$r.txt | head -6
  done
done
date -u
