set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bench_transformer-base bench_transformer-new suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 100 ~/suite attention tensor_cores 2>&1 | tail -12 | tee "$o/tests.txt"
for b in bench_transformer-new bench_transformer-base; do
  VOLTA_BENCH_KERNELS=1 timeout 60 ~/$b --attention-only --lengths 64x256,8x1024 --attention-dropout 0.2 2>&1 | tee "$o/$b-attention.txt" | grep -v "^    "
  VOLTA_BENCH_KERNELS=1 timeout 90 ~/$b --step-only 2>&1 | tee "$o/$b-step.txt" | grep -v "^    " | grep -v "one step"
done
