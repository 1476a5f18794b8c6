#!/usr/bin/env bash
# A/B: old (attention keys whole up to 1024) and new (whole up to 256, 128-key splits past), alternating.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bl_old bl_new test_suite; do gunzip -c .device/final/$f.gz > ~/$f; chmod +x ~/$f; done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
M="--model $HOME/model.gguf --device gpu"
{
for f in inference llama replay; do timeout 300 ~/test_suite $f 2>&1 | grep -E "test result|FAILED|panicked"; done
for r in 1 2 3; do
for b in old new; do
  echo "== $b round $r"
  ~/bl_$b $M --prompt 512 --tokens 128 --runs 5 | grep -E "pp|tg"
  ~/bl_$b $M --prompt 512 --tokens 128 --runs 3 --batch 1 | grep batch
  ~/bl_$b $M --prompt 900 --tokens 100 --runs 3 --batch 1,4 | grep batch
  ~/bl_$b $M --prompt 128 --tokens 128 --runs 3 --batch 1,4,16,64 | grep batch
done
done
date -u
} 2>&1 | tee "${OUT:-/tmp}/depth.txt"
