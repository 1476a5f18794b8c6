# The half step alone, before and after settling leaf gradients, three rounds
# alternating, with each step's kernel profile.
set -u
ROWS="--step-only --step-precision half" PEER=0 VOLTA_BENCH_KERNELS=1 \
  bash scripts/device/binaries-ab.sh 3 bt_before.gz bt_after.gz > ${OUT:-/tmp}/ab.txt 2>&1
grep -E "== build|gpt_step_sh|profile" ${OUT:-/tmp}/ab.txt
