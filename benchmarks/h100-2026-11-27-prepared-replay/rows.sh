#!/usr/bin/env bash
# Multi-row GEMV A/B: old (main) and new (ROWS up to 4; knob ROWS=1, 2) alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bl_old bl_new; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
for f in llama-bench llama-batched-bench; do gunzip -c .device/pl/$f.gz > ~/$f; chmod +x ~/$f; done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
export VOLTA_CACHE_DIR=$HOME/volta-cache
A="--model $HOME/model.gguf --device gpu --prompt 128 --tokens 128 --runs 3 --batch 1,2,4,8"
{
for r in 1 2 3; do
  echo "== round $r"
  echo "-- old";    ~/bl_old $A | grep -E "batch"
  echo "-- new";    ~/bl_new $A | grep -E "batch"
  echo "-- new ROWS=2"; VOLTA_QMATMUL_ROWS=2 ~/bl_new $A | grep -E "batch"
  echo "-- new ROWS=1"; VOLTA_QMATMUL_ROWS=1 ~/bl_new $A | grep -E "batch"
done
echo "== llama-batched-bench"
~/llama-batched-bench -m ~/model.gguf -ngl 99 -fa 1 -c 20000 -npp 128 -ntg 128 -npl 1,1,2,4,8 2>&1 | grep -E "^\|"
echo "== profiles"
echo "-- old"; ~/bl_old --model ~/model.gguf --device gpu --prompt 0 --tokens 0 --profile --batch 4
echo "-- new"; ~/bl_new --model ~/model.gguf --device gpu --prompt 0 --tokens 0 --profile --batch 2,4,8
echo "== llama.cpp perf logger (decode)"
GGML_VK_PERF_LOGGER=1 ~/llama-bench -m ~/model.gguf -ngl 99 -fa 1 -r 1 -p 0 -n 3 2>&1 | tail -60
} 2>&1 | tee "${OUT:-/tmp}/rows.txt"
