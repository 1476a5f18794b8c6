#!/usr/bin/env bash
# A/B of two or more builds of bench_transformer in one call on the GPU machine,
# alternating, then PyTorch's rows (transformer_peers.py) in the same call:
# `binaries-ab.sh ROUNDS bench_transformer_before.gz bench_transformer.gz` (names
# under .device/bin). ROWS: bench_transformer's arguments (default --step-only);
# PEER=0 skips PyTorch, PEER_ARGS passes it arguments (e.g. --step-only).
# VOLTA_BENCH_KERNELS=1 lists each step's costliest kernels.
# TESTS="filters": first the release suite (.device/bin/test_suite.gz) on those
# filters, its summary in $OUT/tests.txt. DETAIL="half full": before the rounds,
# each build's step in those precisions with every launch profiled
# ($OUT/detail-bN-PRECISION.txt; the lines matching DETAIL_GREP printed).
# Carry .device/{gl,gpu-env.sh} and the named binaries (and test_suite.gz).
set -u
rounds=${1:-2}
shift
o=${OUT:-/tmp}
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
v=0
for gz in "$@"; do
  v=$((v + 1))
  gunzip -c ".device/bin/$gz" > ~/"build$v" && chmod +x ~/"build$v"
done
if [ -n "${TESTS:-}" ]; then
  gunzip -c .device/bin/test_suite.gz > ~/test_suite && chmod +x ~/test_suite
  timeout 200 ~/test_suite $TESTS 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
fi
for p in ${DETAIL:-}; do
  v=0
  for gz in "$@"; do
    v=$((v + 1))
    VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
      timeout 60 ~/"build$v" --step-only --step-precision "$p" > "$o/detail-b$v-$p.txt" 2>&1
    echo "== build $v ($gz), $p, every launch profiled"
    grep -E "_B64 |one step|profile${DETAIL_GREP:+|$DETAIL_GREP}" "$o/detail-b$v-$p.txt"
  done
done
rows=(${ROWS:---step-only})
for r in $(seq "$rounds"); do
  v=0
  for gz in "$@"; do
    v=$((v + 1))
    echo "== build $v ($gz), round $r"
    timeout 200 ~/"build$v" "${rows[@]}" 2>&1 | tee "$o/b$v-$r.txt" | grep -v "^    "
  done
done
if [ "${PEER:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 timeout 200 python3 scripts/device/transformer_peers.py ${PEER_ARGS:-} 2>&1 | tee "$o/torch.txt"
fi
date -u
