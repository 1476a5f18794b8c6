#!/usr/bin/env bash
# The language-model benchmark on the GPU machine, in one call (see
# ../shared/device/README.md). Prepare here:
#   cargo build --release -p volta-examples --example bench_llm
#   cargo test --release -p volta --test suite --no-run
#   strip + gzip both into .device/bin/{bench_llm,test_suite}.gz,
#   head -c 1785664 SmolLM2-135M-Instruct.Q4_1.gguf > .device/sk/header.bin
# and carry .device/{gl,gpu-env.sh,bin,pl,sk} (pl: the Vulkan llama-bench, gzipped).
# Without the real file (98 MB, two calls to carry), scripts/device/gguf_skeleton.py
# rebuilds its exact layout with placeholder weights: kernel timings are the same.
set -u
source .device/gpu-env.sh >/dev/null
date -u
for f in bench_llm test_suite; do gunzip -c .device/bin/$f.gz > ~/$f; chmod +x ~/$f; done
gunzip -c .device/pl/llama-bench.gz > ~/llama-bench && chmod +x ~/llama-bench
[ -f ~/model.gguf ] || python3 scripts/device/gguf_skeleton.py .device/sk/header.bin ~/model.gguf
~/test_suite inference:: 2>&1 | tail -3   # the kernels' parity tests, on this GPU
B="$HOME/bench_llm --model $HOME/model.gguf --device gpu --prompt 512 --tokens 128 --runs 5"
{
  echo "== Volta (lanes: adapter's subgroup, shuffle sums)"; $B
  for L in 16 8; do echo "== Volta, VOLTA_QMATMUL_LANES=$L"; VOLTA_QMATMUL_LANES=$L $B; done
  echo "== Volta, no subgroups (tree sums)"; VOLTA_GPU_DISABLE=subgroup $B
  echo "== llama.cpp Vulkan"; ~/llama-bench -m ~/model.gguf -ngl 99 -p 512 -n 128 -fa 0,1 -r 5 2>&1 | grep -E "^\|"
  echo "== Volta again"; $B
  echo "== profile"; ${B% --runs 5} --runs 1 --profile
} 2>&1 | tee "${OUT:-/tmp}/llm.txt" | grep -v "^loaded"
