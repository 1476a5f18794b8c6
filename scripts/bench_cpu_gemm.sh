#!/usr/bin/env bash
# f32 GEMM on the CPU: Volta's `Tensor::matmul` and numpy's `a @ b`, same size, same
# timing method (median of the runs after warm-up), in one invocation.
#   scripts/bench_cpu_gemm.sh [SIZE] [RUNS]    (defaults: 1024 15)
set -euo pipefail
cd "$(dirname "$0")/.."
size=${1:-1024}
runs=${2:-15}

if ! python3 -c 'import numpy' 2>/dev/null; then
    echo "bench: installing numpy ..." >&2
    python3 -m pip install --quiet numpy 2>/dev/null ||
        python3 -m pip install --quiet --break-system-packages numpy
fi

echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
cargo build --quiet --release --example bench_cpu
volta_out=$(./target/release/examples/bench_cpu --size "$size" --runs "$runs")
echo "$volta_out" | grep -v '^volta_gflops='
volta=$(echo "$volta_out" | sed -n 's/^volta_gflops=//p')

numpy_out=$(python3 - "$size" "$runs" <<'PY'
import sys, time
import numpy as np
n, runs = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(1)
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
for _ in range(3):
    a @ b
times = []
for _ in range(runs):
    t = time.perf_counter()
    a @ b
    times.append(time.perf_counter() - t)
times.sort()
median = times[runs // 2]
print(f"numpy {np.__version__} f32 GEMM {n}^3: median {median * 1e3:.3f} ms "
      f"(best {times[0] * 1e3:.3f} ms) over {runs} runs, "
      f"{2 * n**3 / median / 1e9:.1f} GFLOP/s")
print(f"numpy_gflops={2 * n**3 / median / 1e9:.2f}")
PY
)
echo "$numpy_out" | grep -v '^numpy_gflops='
numpy=$(echo "$numpy_out" | sed -n 's/^numpy_gflops=//p')
python3 -c "import sys; v, n = map(float, sys.argv[1:]); print(f'ratio volta/numpy: {v / n:.2f} ({v:.1f} vs {n:.1f} GFLOP/s)')" "$volta" "$numpy"
