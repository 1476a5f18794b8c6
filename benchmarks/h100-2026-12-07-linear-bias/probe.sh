# Products that start from their bias (a linear layer's `addmm`), timed against
# the build before them in one call. Binaries under .device/bin: bt_base.gz
# (main at 86734e4 with ../h100-2026-12-07-row-kernels/knobs.patch, whose knobs
# default to main's behaviour), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bt_base bench_transformer test_suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
date -u
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)
echo "$gpu"
timeout 150 ~/test_suite gpu_parity attention tensor_cores layers_gpu optim_gpu 2>&1 \
  | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for v in bt_base bench_transformer; do
  for p in half full; do
    VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
      timeout 60 ~/$v --step-only --step-precision $p > "$o/detail-$v-$p.txt" 2>&1
    echo "== $v $p"
    grep -E "_B64 |x0 \+ x1\) grid|one step" "$o/detail-$v-$p.txt"
  done
done
for r in 1 2 3; do
  for v in bt_base bench_transformer; do
    echo "== $v round $r"
    timeout 60 ~/$v --step-only 2>&1 | grep -E "_B64 "
  done
done
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep "ms "
case "$gpu" in
  *H200*)
    # The column sums four columns a thread (SerialVec4), on the H200 whose
    # profile suggested them: on (1) and off (0), alternating.
    for q in 1 0 1 0; do
      echo "== H200 VOLTA_ROW_QUADS=$q"
      VOLTA_ROW_QUADS=$q VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
        timeout 60 ~/bt_base --step-only --step-precision half 2>&1 | grep -E "_B64 |sum rows"
    done
    ;;
esac
date -u
