#!/usr/bin/env bash
# The suite's inference, llama and tensor-core tests on the H100; then the batch's
# output-matrix product under tensor-core tile variants (profile at B 2, 4, 8).
set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/bin/test_suite.gz > ~/test_suite; chmod +x ~/test_suite
gunzip -c .device/bin/bl_new.gz > ~/bl_new; chmod +x ~/bl_new
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
export VOLTA_CACHE_DIR=$HOME/volta-cache
{
for f in inference llama tensor_cores; do
  timeout 300 ~/test_suite $f 2>&1 | grep -E "^test |test result"
done
for t in none 1,4,1,2 1,2,1,2 1,4,1,1 2,2,1,1 1,8,1,1 1,2,1,4; do
  echo "== tiles $t"
  if [ $t = none ]; then T=""; else T="--tensor-core-tiles $t"; fi
  ~/bl_new --model ~/model.gguf --device gpu --prompt 0 --tokens 0 --profile --batch 2,4,8 $T 2>&1 | grep -E "batched decode step|tensor-core|total"
done
date -u
} 2>&1 | tee "${OUT:-/tmp}/tiles.txt"
