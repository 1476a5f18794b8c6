#!/usr/bin/env bash
# A tuning sweep of the language-model benchmark on the GPU machine, one call:
# SWEEP (space-separated settings, each VAR=value[,VAR=value], one tg128 run each), llama.cpp's
# llama-bench unless NOPEER is set, Volta, its profile, and a profile for each
# setting in PROFILE. Carry .device/{gl,gpu-env.sh,bin,pl,sk} (see bench-llm.sh).
set -u
source .device/gpu-env.sh >/dev/null; date -u
for f in bench_llm inference; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
gunzip -c .device/pl/llama-bench.gz > ~/llama-bench && chmod +x ~/llama-bench
python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
~/inference 2>&1 | tail -2
B="$HOME/bench_llm --model $HOME/model.gguf --device gpu --prompt 512 --tokens 128"
{
for e in ${SWEEP:-X=1}; do echo "== $e"; env ${e//,/ } $B --runs 5 | grep tg; done
[ -n "${NOPEER:-}" ] || { echo "== llama.cpp"; ~/llama-bench -m ~/model.gguf -ngl 99 -p 512 -n 128 -fa 0,1 -r 5 2>&1 | grep -E "^\|"; }
echo "== Volta"; $B --runs 5
echo "== profile"; $B --runs 1 --profile
for e in ${PROFILE:-}; do echo "== profile $e"; env ${e//,/ } $B --runs 1 --profile | head -12; done
} 2>&1 | grep -v ^loaded | tee $OUT/sweep.txt
