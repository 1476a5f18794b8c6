set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all timeout 150 ~/bt --step-only 2>&1 > $o/step-detail.txt
grep -E "matmul|sum rows|gpt_step|profile" $o/step-detail.txt
