set -u
o=${OUT:-/tmp}
ROWS="--step-only --step-precision full" VOLTA_BENCH_KERNELS=1 PEER=0 bash scripts/device/binaries-ab.sh 3 bt-base.gz bt-tiles.gz > $o/ab.txt 2>&1
grep -E "^== |gpt_step_shakespeare|  matmul|profile" $o/ab.txt
