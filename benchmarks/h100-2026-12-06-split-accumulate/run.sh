#!/usr/bin/env bash
# Split-K's slices adding into the product atomically (the default of this
# build) against writing partial products that a second kernel sums
# (`--split-partials`), one binary, alternating: the whole GPU suite, then
# three rounds of the GPT step (f32 and half precision; the first round with
# its kernels listed), the MLP and LeNet Adam steps, and the GPT step's products
# alone. Carry .device/{gl,gpu-env.sh,bin/{bench_transformer,bench_gpu,test_suite}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bench_transformer bench_gpu test_suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
date -u
timeout 240 ~/test_suite 2>&1 | grep -E "panicked|FAILED|failed|test result" | head -20
for r in 1 2 3; do
  for mode in accumulate partials; do
    flag=""; [ $mode = partials ] && flag="--split-partials"
    echo "== round $r, $mode"
    k=""; [ $r = 1 ] && k=1
    VOLTA_BENCH_KERNELS=$k timeout 150 ~/bench_transformer --step-only $flag > "$o/step-$mode-$r.txt" 2>&1
    grep -E "_B64 |sum rows|matmul|elementwise s0|of kernels" "$o/step-$mode-$r.txt"
    timeout 100 ~/bench_gpu --train --defaults $flag 2>&1 | grep -E "mlp|lenet|MLP|LeNet" | head -6
  done
done
for mode in accumulate partials; do
  flag=""; [ $mode = partials ] && flag="--split-partials"
  echo "== products, $mode"
  timeout 100 ~/bench_transformer --products full $flag 2>&1 | grep -E "dw_|dx_|fwd_"
done
date -u
