#!/usr/bin/env bash
# Volta's language model beside llama.cpp's Vulkan backend on one GPU, in one
# call: cold start, prefill, decode and batched decode (see ../shared/device/README.md).
# Prepare here:
#   cargo build --release -p volta-examples --example bench_llm
#   strip + gzip it into .device/bin/bench_llm.gz;
#   bash ../shared/device/build-llama-cpp.sh .device/llama, then gzip
#   llama-bench, llama-batched-bench and llama-simple into .device/pl/;
#   head -c 1785664 SmolLM2-135M-Instruct.Q4_1.gguf > .device/sk/header.bin
# and carry .device/{gl,gpu-env.sh,bin/bench_llm.gz,pl,sk}. The model is the Q4_1
# file's exact layout with placeholder weights (scripts/device/gguf_skeleton.py):
# kernel timings are the real file's.
#
# llama.cpp compiles a pipeline the first time a shape needs it, inside the
# timed repetitions of a process's first test of that shape (pp512 12.4k tok/s
# as the first test, 43k as the second, H100 2026-11-27): each llama.cpp row is
# therefore asked twice and the second is the figure.
#
# Cold start: seconds from launching the process to its exit after one decoded
# token (`date` around it), with the NVIDIA shader cache and Volta's cache
# folder emptied first ("new machine"), then again with them filled. Both
# programs run a 5-token prompt and decode one token.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bench_llm; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
for f in llama-bench llama-batched-bench llama-simple; do
  gunzip -c .device/pl/$f.gz > ~/$f; chmod +x ~/$f
done
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
export __GL_SHADER_DISK_CACHE_PATH=$HOME/shader-cache VOLTA_CACHE_DIR=$HOME/volta-cache
secs() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); awk "BEGIN { printf \"%.2f\", $t1 - $t0 }"; }
volta_first() { ~/bench_llm --model ~/model.gguf --device gpu --first-token --prompt 5; }
llama_first() { ~/llama-simple -m ~/model.gguf -ngl 99 -n 1 "The capital of France is"; }
{
  echo "== cold start (s): new machine, then caches filled"
  for r in 1 2; do
    rm -rf ~/shader-cache ~/volta-cache
    echo "Volta     new $(secs volta_first)  filled $(secs volta_first) $(secs volta_first)"
    rm -rf ~/shader-cache ~/volta-cache
    echo "llama.cpp new $(secs llama_first)  filled $(secs llama_first) $(secs llama_first)"
  done
  B="$HOME/bench_llm --model $HOME/model.gguf --device gpu --runs 5"
  L="$HOME/llama-bench -m $HOME/model.gguf -ngl 99 -fa 1 -r 5"
  for r in 1 2 3; do
    echo "== prefill and decode, round $r"
    $B --prompt 512 --tokens 128 | grep -v "^loaded"
    $L -p 512,512 -n 128,128 | grep -E "pp512|tg128"
  done
  echo "== batched decode: 128-token prompts, 128 tokens each"
  $B --prompt 128 --tokens 128 --runs 3 --batch 1,4,16,64 | grep batch
  ~/llama-batched-bench -m ~/model.gguf -ngl 99 -fa 1 -c 20000 -npp 128 -ntg 128 \
    -npl 1,1,4,16,64 2>&1 | grep -E "^\|"
  echo "== again"
  $B --prompt 128 --tokens 128 --runs 3 --batch 1,4,16,64 | grep batch
  ~/llama-batched-bench -m ~/model.gguf -ngl 99 -fa 1 -c 20000 -npp 128 -ntg 128 \
    -npl 1,1,4,16,64 2>&1 | grep -E "^\|"
} 2>&1 | tee "${OUT:-/tmp}/llm-peer.txt"
