#!/usr/bin/env bash
# Session 11: the GPU test binaries (release) on the H100, the f32 tile sweep
# (`bench_gpu --gemm-f32`, every candidate at 1024/2048/4096) and PyTorch on the
# same products. Outputs go into one tarball. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/*
date -u > ~/o/dates.txt
for f in .device/bin/*.gz; do
  b=$(basename $f .gz); gunzip -c $f > ~/$b && chmod +x ~/$b
done
for t in gpu_parity gpu_autotune gpu_tensor_cores f16 layers_gpu; do
  timeout 150 ~/test_$t --test-threads=1 > ~/o/test_$t.txt 2>&1
  echo "$t: $(grep -E '^test result' ~/o/test_$t.txt)"
  grep -E "^test .*FAILED|panicked" ~/o/test_$t.txt | head -5
done | tee ~/o/tests.txt
date -u >> ~/o/dates.txt
timeout 200 ~/bench_gpu --gemm-f32 > ~/o/gemm-f32.txt 2>&1
grep -E "n= 4096|n= 2048|^matmul" ~/o/gemm-f32.txt
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/gemm_peers.py > ~/o/gemm_torch.txt 2>&1
cat ~/o/gemm_torch.txt
date -u >> ~/o/dates.txt
tar czf "$OUT/out.tgz" -C ~/o .
