#!/usr/bin/env bash
# A/B of two or more builds of bench_transformer in one call on the GPU machine,
# alternating, then PyTorch's rows (transformer_peers.py) in the same call:
# `binaries-ab.sh ROUNDS bench_transformer_before.gz bench_transformer.gz` (names
# under .device/bin). ROWS: bench_transformer's arguments (default --step-only);
# PEER=0 skips PyTorch. VOLTA_BENCH_KERNELS=1 lists each step's costliest kernels.
# Carry .device/{gl,gpu-env.sh} and the named binaries.
set -u
rounds=${1:-2}
shift
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
v=0
for gz in "$@"; do
  v=$((v + 1))
  gunzip -c ".device/bin/$gz" > ~/"build$v" && chmod +x ~/"build$v"
done
rows=(${ROWS:---step-only})
for r in $(seq "$rounds"); do
  v=0
  for gz in "$@"; do
    v=$((v + 1))
    echo "== build $v ($gz), round $r"
    timeout 200 ~/"build$v" "${rows[@]}" 2>&1 | tee "${OUT:-/tmp}/b$v-$r.txt" | grep -v "^    "
  done
done
if [ "${PEER:-1}" = 1 ]; then
  PYTHONUNBUFFERED=1 timeout 200 python3 scripts/device/transformer_peers.py 2>&1 | tee "${OUT:-/tmp}/torch.txt"
fi
