# A/B of four changes in the GPT step, one binary built with knobs.patch
# applied (`git apply benchmarks/h100-2026-12-07-row-kernels/knobs.patch`, build
# bench_transformer and the suite, `git checkout volta`):
#   VOLTA_ROW_QUADS=0   column sums read a column a thread (SerialVec4 off)
#   VOLTA_ROW_NARROW=0  short rows take a whole subgroup (16-lane rows off)
#   VOLTA_SETTLE=0      a residual's gradient is not settled
#   VOLTA_ADAM_VEC4=0   Adam steps one element a thread
#   VOLTA_SPLIT_THREADS=N  chunks a strided reduction's first pass keeps busy
#                          (default 2^18), swept with the changes on
# All four 0 is main before them. Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
gunzip -c .device/bin/test_suite.gz > ~/suite && chmod +x ~/suite
date -u
nvidia-smi --query-gpu=name --format=csv,noheader
knobs() { echo "VOLTA_SETTLE=$1 VOLTA_ROW_QUADS=$1 VOLTA_ROW_NARROW=$1 VOLTA_ADAM_VEC4=$1"; }
for q in 0 1; do
  env $(knobs $q) VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
    timeout 60 ~/bt --step-only --step-precision half > $o/detail-$q.txt 2>&1
  echo "== new $q"
  grep -E "_B64 |sum rows|normalize|x0 \+ x1|ge\(u|adam|profile \(" $o/detail-$q.txt
done
for s in 65536 1048576; do
  VOLTA_SPLIT_THREADS=$s VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
    timeout 60 ~/bt --step-only --step-precision half > $o/detail-s$s.txt 2>&1
  echo "== split threads $s"
  grep -E "_B64 |sum rows \[|profile \(" $o/detail-s$s.txt
done
date -u
timeout 90 ~/suite gpu_parity attention tensor_cores layers_gpu optim_gpu 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for r in 1 2; do
  for q in 0 1; do
    echo "== round $r new $q"
    env $(knobs $q) timeout 60 ~/bt --step-only 2>&1 | grep -E "_B64 "
  done
done
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep "ms "
date -u
