#!/usr/bin/env bash
# The second call: where a split product's time goes (each product's kernels),
# and the split products on the large tensor-core tiles of half precision
# (2×2 subgroups of 4×4 fragments: --tensor-core-tiles 0, no split K).
set -u
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
for b in bt; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for sum in tensor flush-tile; do
  echo "== kernels, VOLTA_EXP_SPLIT_SUM=$sum"
  VOLTA_EXP_SPLIT_SUM=$sum VOLTA_BENCH_KERNELS=1 timeout 90 ~/bt --products split 2>&1 | grep -v along_k | grep -v "^$"
done > "$o/kernels.txt" 2>&1
tail -5 "$o/kernels.txt"
for sum in tensor flush-tile; do
  echo "== tiles 0, VOLTA_EXP_SPLIT_SUM=$sum"
  VOLTA_EXP_SPLIT_SUM=$sum timeout 90 ~/bt --products all --tensor-core-tiles 0 2>&1 | grep -E "product_|error|panicked" | grep -v along_k
done | tee "$o/tiles0.txt"
date -u
