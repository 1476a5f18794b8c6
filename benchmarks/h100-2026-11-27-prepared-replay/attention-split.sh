#!/usr/bin/env bash
set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/final/bl_knob.gz > ~/bl; chmod +x ~/bl
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
{
for r in 1 2; do
for s in 1024 256 128 64; do
  echo "== split $s round $r"
  VOLTA_ATTENTION_SPLIT=$s ~/bl --model ~/model.gguf --device gpu --prompt 0 --tokens 128 --runs 3 | grep tg
  VOLTA_ATTENTION_SPLIT=$s ~/bl --model ~/model.gguf --device gpu --prompt 512 --tokens 128 --runs 3 --batch 1 | grep batch
  VOLTA_ATTENTION_SPLIT=$s ~/bl --model ~/model.gguf --device gpu --prompt 900 --tokens 100 --runs 3 --batch 1 | grep batch
done
done
VOLTA_ATTENTION_SPLIT=1024 ~/bl --model ~/model.gguf --device gpu --prompt 0 --tokens 0 --profile 2>&1 | grep -A8 "decode step"
date -u
} 2>&1 | tee "${OUT:-/tmp}/split.txt"
