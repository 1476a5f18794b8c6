#!/usr/bin/env bash
# The first call: MatmulPrecision::Split with scales from a reduction before
# each product and four ways of summing its three products
# (VOLTA_EXP_SPLIT_SUM): accuracy against f64 and the f32 kernel, the step's
# products, and the GPT step against PyTorch. Binaries: the branch's
# bench_transformer (bt) and test suite (suite), gzipped in .device/bin.
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
for sum in tensor corrected flush-tile flush-step; do
  echo "== accuracy, VOLTA_EXP_SPLIT_SUM=$sum"
  VOLTA_EXP_SPLIT_SUM=$sum NOASSERT=1 timeout 90 ~/suite split_precision --nocapture 2>&1 \
    | grep -E "split |test result|panicked"
done | tee "$o/accuracy.txt"
date -u
timeout 120 ~/bt --products all 2>&1 | grep -E "product_|error|panicked" | grep -v along_k | tee "$o/products-all.txt"
for sum in tensor corrected flush-step; do
  echo "== products, VOLTA_EXP_SPLIT_SUM=$sum"
  VOLTA_EXP_SPLIT_SUM=$sum timeout 60 ~/bt --products split 2>&1 | grep -E "product_|error|panicked" | grep -v along_k
done | tee "$o/products-sums.txt"
date -u
timeout 120 ~/bt --step-only --step-precision all 2>&1 | tee "$o/step.txt"
timeout 120 python3 scripts/device/transformer_peers.py --step-only 2>&1 | tee "$o/step-torch.txt"
timeout 60 ~/bt --step-only --step-precision full 2>&1 | grep gpt_step | tee -a "$o/step.txt"
VOLTA_EXP_SPLIT_SUM=tensor timeout 60 ~/bt --step-only --step-precision split 2>&1 | grep gpt_step | sed 's/^/tensor: /' | tee -a "$o/step.txt"
date -u
