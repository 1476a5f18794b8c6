set -u
source .device/gpu-env.sh >/dev/null
OUT=$OUT bash scripts/device/bench-transformer.sh
VOLTA_BENCH_KERNELS=all timeout 100 ~/bench_transformer --step-only > $OUT/step-kernels.txt 2>&1
date -u
