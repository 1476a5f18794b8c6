# The tensor-core GPU tests on the new build, then the half step, the build
# before (bt_before) and with eight-subgroup tiles for one to two waves
# (bt_few) alternating, three rounds.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/test_suite.gz > ~/suite && chmod +x ~/suite
timeout 200 ~/suite tensor_cores half 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
ROWS="--step-only --step-precision half" PEER=0 VOLTA_BENCH_KERNELS=1 \
  bash scripts/device/binaries-ab.sh 3 bt_before.gz bt_few.gz > "$o/ab.txt" 2>&1
grep -E "== build|gpt_step|matmul tensor-core" "$o/ab.txt"
