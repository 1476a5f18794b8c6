#!/usr/bin/env bash
# The second call: the language model's GPU tests on the store build, then the
# split kernel (masked high halves) with each step's three products summed
# apart and added round-to-nearest (VOLTA_EXP_SPLIT_RN=1): its accuracy, and
# the step's products without the scales' scan. Binaries as in probe.sh.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in test_suite bt_split suite_split; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
echo "== split accuracy, VOLTA_EXP_SPLIT_RN=1" | tee "$o/split-accuracy-rn.txt"
VOLTA_EXP_SPLIT_RN=1 NOASSERT=1 timeout 60 ~/suite_split split_precision --nocapture 2>&1 \
  | grep -E "split |result" | tee -a "$o/split-accuracy-rn.txt"
for rn in 0 1; do
  echo "== split products, no scan, VOLTA_EXP_SPLIT_RN=$rn"
  env VOLTA_EXP_SPLIT_NOSCAN=1 $( [ $rn = 1 ] && echo VOLTA_EXP_SPLIT_RN=1 ) timeout 60 \
    ~/bt_split --products split 2>&1 | grep product_ | grep -v along_k
done | tee "$o/split-products.txt"
timeout 150 ~/test_suite inference llama 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests-llm.txt"
date -u
