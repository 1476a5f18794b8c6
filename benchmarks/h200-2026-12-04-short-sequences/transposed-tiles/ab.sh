#!/usr/bin/env bash
# Tensor-core products whose tiles are contiguous along m (A) or n (B), transposed
# on their way into shared memory (VOLTA_COOP_TRANSPOSE=1) against fragments
# loaded in the transposed form: the tensor-core tests with the knob on, then the
# step's products in half precision and the half step, the two settings
# alternating. Carry .device/{gl,gpu-env.sh,bin/{bench_transformer,test_suite}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in bench_transformer test_suite; do gunzip -c .device/bin/$f.gz > ~/$f && chmod +x ~/$f; done
VOLTA_COOP_TRANSPOSE=1 ~/test_suite gpu_tensor_cores:: 2>&1 | grep -E "^test |test result|panicked" | tee $o/tests.txt
for r in 1 2; do
  for knob in 0 1; do
    VOLTA_COOP_TRANSPOSE=$knob VOLTA_BENCH_KERNELS=1 timeout 100 ~/bench_transformer --products half > $o/products-$knob-$r.txt 2>&1
    echo "== products transpose=$knob round $r"; grep TFLOP $o/products-$knob-$r.txt
  done
  for knob in 0 1; do
    VOLTA_COOP_TRANSPOSE=$knob VOLTA_BENCH_KERNELS=1 timeout 100 ~/bench_transformer --step-only --step-precision half > $o/step-$knob-$r.txt 2>&1
    echo "== step transpose=$knob round $r"; grep -E "ms |profile|tensor-core" $o/step-$knob-$r.txt | head -6
  done
done
date -u
