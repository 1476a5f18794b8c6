set -u
o=${OUT:-/tmp}
ROWS="--step-only" VOLTA_BENCH_KERNELS=1 PEER=0 bash scripts/device/binaries-ab.sh 2 bt-base.gz bt-split2.gz > $o/ab.txt 2>&1
grep -E "^== |gpt_step_shakespeare" $o/ab.txt
grep -H -E "calls  (matmul|sum rows)$" $o/b*.txt
VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all timeout 60 ~/build2 --step-only --step-precision full 2>&1 | grep -E "matmul|sum rows" | head -12
mkdir -p $o/rounds
ROUNDS=2 OUT=$o/rounds bash scripts/device/step-rounds.sh 2>&1 | tail -12
