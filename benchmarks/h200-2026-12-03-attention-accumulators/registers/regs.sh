#!/usr/bin/env bash
# Register counts (shader_stats) and timings of attention variants (VOLTA_EXP).
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-exp shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
for v in none nosr prhalf dqhalves prhalf,dqhalves nosr,prhalf,dqhalves; do
  n=${v//,/+}
  echo "== $v"
  rm -rf ~/k-$n
  VOLTA_DUMP_WGSL=~/k-$n VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --attention-only --lengths 64x256,2x4096 --attention-dropout 0.2 2>&1 | tee "$o/att-$n.txt" | grep "tensor-core"
  VOLTA_EXP=$v VOLTA_BENCH_KERNELS=1 timeout 100 ~/bt-exp --step-only --step-precision half 2>&1 | tee "$o/step-$n.txt" | grep -E "flash_attention tensor-core|_B64 "
  mkdir -p ~/a-$n && cp ~/k-$n/*flash_attention_tensor-core* ~/a-$n/ 2>/dev/null
  timeout 60 ~/shader_stats ~/a-$n 2>&1 | grep -v "matmul" | sed 's/Binary_Size.*Shared/Shared/' | tee "$o/regs-$n.txt"
done
date -u
