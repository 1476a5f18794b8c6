#!/usr/bin/env bash
# A/B: old (replays recorded and finished on the critical path) and new (a
# replay encoded ahead while the GPU runs the previous one), alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bl_old bl_new test_suite; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
export VOLTA_CACHE_DIR=$HOME/volta-cache
{
for f in inference llama replay capture; do
  timeout 300 ~/test_suite $f 2>&1 | grep -E "test result|FAILED|panicked"
done
for r in 1 2 3 4; do
  echo "== round $r"
  echo "-- old"; ~/bl_old --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5 | grep -E "tg|pp"
  ~/bl_old --model ~/model.gguf --device gpu --prompt 128 --tokens 128 --runs 3 --batch 1,4,16,64 | grep batch
  echo "-- new"; ~/bl_new --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5 | grep -E "tg|pp"
  ~/bl_new --model ~/model.gguf --device gpu --prompt 128 --tokens 128 --runs 3 --batch 1,4,16,64 | grep batch
done
date -u
} 2>&1 | tee "${OUT:-/tmp}/prepared.txt"
