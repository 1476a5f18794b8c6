#!/usr/bin/env bash
# The language-model figures with the real file, on a warm GPU machine that
# already holds it as ~/model.gguf (carried in two parts over two calls: see
# ../shared/device/README.md). One call: the checksum, the kernels' parity tests,
# bench-llm.sh (Volta, llama.cpp's Vulkan llama-bench, Volta again, profiles), the
# GPU's greedy chat answer, then PyTorch (torch_peers.py: Hugging Face eager at
# SmolLM2's shape, and the GEMM/RMSNorm peers) and bench_gpu, for issue 12.
set -u
md5sum ~/model.gguf
bash scripts/device/bench-llm.sh
gunzip -c .device/bin/generate.gz > ~/generate && chmod +x ~/generate
~/generate --model ~/model.gguf --device gpu --prompt "What is the capital of France?" \
  --max-tokens 32 2>&1 | tee "${OUT:-/tmp}/generate.txt"
PYTHONUNBUFFERED=1 timeout 150 python3 .device/torch_peers.py 2>&1 | tee "${OUT:-/tmp}/torch.txt"
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu && chmod +x ~/bench_gpu
timeout 200 ~/bench_gpu 2>&1 | tee "${OUT:-/tmp}/bench_gpu.txt" | tail -40
