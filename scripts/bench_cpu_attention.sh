#!/usr/bin/env bash
# Attention on the CPU: Volta's fused op and the same attention composed of
# products and a softmax (examples/bench_cpu_attention.rs), and numpy's composed
# forward at the same shape, timed the same way (median of the runs after
# warm-up), in one invocation.
#   scripts/bench_cpu_attention.sh [BATCH] [LEN] [RUNS]    (defaults: 8 256 7)
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${1:-8}
len=${2:-256}
runs=${3:-7}

if ! python3 -c 'import numpy' 2>/dev/null; then
    echo "bench: installing numpy ..." >&2
    python3 -m pip install --quiet numpy 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages numpy
fi

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --quiet --release -p volta-examples --example bench_cpu_attention
./target/release/examples/bench_cpu_attention --batch "$batch" --len "$len" --runs "$runs" | grep -v '^volta_'

python3 - "$batch" "$len" "$runs" <<'PY'
import sys, time
import numpy as np
b, t, runs = map(int, sys.argv[1:])
h, d = 6, 64
rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((b, h, t, d), dtype=np.float32) for _ in range(3))
causal = np.triu(np.full((t, t), -np.inf, dtype=np.float32), 1)

def attention(mask):
    s = q @ k.swapaxes(-1, -2) * np.float32(1 / np.sqrt(d))
    if mask is not None:
        s = s + mask
    w = np.exp(s - s.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)) @ v

for name, mask in (("false", None), ("true", causal)):
    for _ in range(2):
        attention(mask)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        attention(mask)
        times.append(time.perf_counter() - start)
    times.sort()
    print(f"numpy {np.__version__} composed forward, causal {name}: {times[runs // 2] * 1e3:.2f} ms")
PY
