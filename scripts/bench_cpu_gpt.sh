#!/usr/bin/env bash
# nanoGPT's shakespeare-char training step on the CPU: Volta's `model!` GPT
# (examples/bench_cpu_gpt.rs) and PyTorch's eager step (bench_cpu_gpt_peer.py),
# same batch, tokens and timing, alternating for ROUNDS rounds in one invocation.
#   scripts/bench_cpu_gpt.sh [BATCH] [RUNS] [ROUNDS]    (defaults: 16 5 3)
# PYTHON names an interpreter with torch (default python3); the CPU wheel of torch
# is enough.
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${1:-16}
runs=${2:-5}
rounds=${3:-3}
python=${PYTHON:-python3}

if ! "$python" -c 'import torch' 2>/dev/null; then
    echo "bench: $python has no torch; set PYTHON to an interpreter that has it" >&2
    exit 1
fi
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --quiet --release -p volta-examples --example bench_cpu_gpt
for round in $(seq "$rounds"); do
    echo "round $round"
    ./target/release/examples/bench_cpu_gpt --batch "$batch" --runs "$runs"
    "$python" scripts/bench_cpu_gpt_peer.py "$batch" "$runs"
done
