#!/usr/bin/env bash
# Padded batches in half precision on tensor cores: the GPU tests of attention
# and tensor cores, then the attention rows (causal, B 8 T 1024 and B 2 T 4096)
# without padding and with every other batch element's keys starting at key
# 256, alternating, two rounds. The padded f32 row is the kernel that padded
# half-precision attention ran before this build.
# Carry .device/{gl,gpu-env.sh,bin/{bench_transformer,test_suite}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bench_transformer test_suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
date -u
timeout 300 ~/test_suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result|^test " | tee "$o/tests.txt"
for r in 1 2; do
  for pad in "" "--padding 256"; do
    echo "== round $r ${pad:-no padding}"
    timeout 120 ~/bench_transformer --attention-only --lengths 8x1024,2x4096 $pad 2>&1 | tee "$o/attn-$r-${pad:+padded}.txt" | grep -E "fwd_bwd"
  done
done
date -u
