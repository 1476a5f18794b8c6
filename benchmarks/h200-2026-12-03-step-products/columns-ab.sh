set -u
o=${OUT:-/tmp}
VOLTA_BENCH_KERNELS=1 PEER=0 bash scripts/device/binaries-ab.sh 3 bt-base.gz bt-new.gz > $o/ab.txt 2>&1
grep -E "^== |gpt_step_shakespeare|sum rows|reduce columns|profile" $o/ab.txt
for v in 1 2; do echo "== build $v sums"; timeout 100 ~/build$v --products full 2>&1 | grep "^sum_"; done
