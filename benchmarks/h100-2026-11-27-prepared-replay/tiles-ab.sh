#!/usr/bin/env bash
# A/B: old (output matrix on 64x64 tensor-core tiles) and new (16x128 for <= 16 rows).
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bl_old bl_new test_suite; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
export VOLTA_CACHE_DIR=$HOME/volta-cache
A="--model $HOME/model.gguf --device gpu --prompt 128 --tokens 128 --runs 3 --batch 1,2,4,8,16,64"
{
for f in inference tensor_cores; do
  timeout 300 ~/test_suite $f 2>&1 | grep -E "test result|FAILED|panicked"
done
for r in 1 2 3; do
  echo "== round $r"
  echo "-- old";    ~/bl_old $A | grep -E "batch"
  echo "-- new";    ~/bl_new $A | grep -E "batch"
done
echo "== profiles"
echo "-- old"; ~/bl_old --model ~/model.gguf --device gpu --prompt 0 --tokens 0 --profile --batch 4,16 | grep -A12 "batched"
echo "-- new"; ~/bl_new --model ~/model.gguf --device gpu --prompt 0 --tokens 0 --profile --batch 4,16 | grep -A12 "batched"
date -u
} 2>&1 | tee "${OUT:-/tmp}/tiles-ab.txt"
