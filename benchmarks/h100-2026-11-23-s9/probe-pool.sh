#!/usr/bin/env bash
# Issue 12's unstable figures: recording and row kernels, then `bench_gpu --gemm
# --defaults` three times (the second after emptying the pool), then PyTorch's
# figures, in one call on the GPU machine. Carry .device/{gl,gpu-env.sh,bin,
# torch_peers.py}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/bin/bench_gpu.gz > ~/bench_gpu; chmod +x ~/bench_gpu
O=${OUT:-/tmp}
timeout 60 ~/bench_gpu --record 2>&1 | tee $O/record.txt
timeout 60 ~/bench_gpu --rows 2>&1 | tee $O/rows.txt
for i in 1 2 3; do
  if [ $i = 2 ]; then export VOLTA_BENCH_EMPTY_POOL=1; else unset VOLTA_BENCH_EMPTY_POOL; fi
  echo "== gemm --defaults run $i (empty pool: ${VOLTA_BENCH_EMPTY_POOL:-0})"
  timeout 120 ~/bench_gpu --gemm --defaults 2>&1 | tee $O/gemm-defaults-$i.txt | grep -E "^(matmul|memory|released)|GPU µs|tensor-core|split|sum" 
done
PYTHONUNBUFFERED=1 timeout 150 python3 .device/torch_peers.py 2>&1 | tee $O/torch.txt
date -u
