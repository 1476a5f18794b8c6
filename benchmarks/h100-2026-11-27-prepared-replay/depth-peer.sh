#!/usr/bin/env bash
# Decode at depth: Volta's batched rows after 512- and 900-token prompts beside
# llama-batched-bench's (-npp 512 / 900), two rounds.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bench_llm llama-batched-bench; do gunzip -c .device/depth/$f.gz > ~/$f; chmod +x ~/$f; done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
{
for r in 1 2; do
  echo "== round $r"
  ~/bench_llm --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 3 --batch 1,4 | grep batch
  ~/bench_llm --model ~/model.gguf --device gpu --prompt 900 --tokens 100 --runs 3 --batch 1,4 | grep batch
  ~/llama-batched-bench -m ~/model.gguf -ngl 99 -fa 1 -c 20000 -npp 512 -ntg 128 -npl 1,1,4 2>&1 | grep -E "^\|"
  ~/llama-batched-bench -m ~/model.gguf -ngl 99 -fa 1 -c 20000 -npp 900 -ntg 100 -npl 1,1,4 2>&1 | grep -E "^\|"
done
date -u
} 2>&1 | tee "${OUT:-/tmp}/depth-peer.txt"
