#!/usr/bin/env bash
# Matmul tuning on the GPU: the tuning test (release test binary), then `bench_gpu
# --gemm --defaults` three times (tuning into an empty cache, reading the cache,
# tuning off), the cache file, and PyTorch on the same shapes. Carry
# .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
O=${OUT:-/tmp}
for f in bench_gpu test_gpu_autotune; do gunzip -c .device/bin/$f.gz > ~/$f && chmod +x ~/$f; done
~/test_gpu_autotune 2>&1 | grep -E "^test |test result|panicked" | tee $O/tests.txt
export VOLTA_CACHE_DIR=$HOME/volta-cache
rm -rf $VOLTA_CACHE_DIR
for run in tuned-first tuned-cached; do
  start=$SECONDS
  timeout 200 ~/bench_gpu --gemm --defaults > $O/gemm-$run.txt 2>&1
  echo "$run: $((SECONDS - start)) s wall"
  grep -E "^(matmul_|matmul tuning)" $O/gemm-$run.txt
done
VOLTA_AUTOTUNE=0 timeout 200 ~/bench_gpu --gemm --defaults > $O/gemm-untuned.txt 2>&1
grep -E "^(matmul_|matmul tuning)" $O/gemm-untuned.txt
cp $VOLTA_CACHE_DIR/* $O/ && cat $VOLTA_CACHE_DIR/*
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py 2>&1 | tee $O/gemm_torch.txt
date -u
