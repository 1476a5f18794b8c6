# Adam writing the f16 copies of the weights that products in half precision
# read, against the build before, in one call. Binaries under .device/bin:
# bt_base.gz (main at eea77c1), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bt_base bench_transformer test_suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 ~/test_suite optim_gpu gpu_tensor_cores layers_gpu 2>&1 \
  | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for v in bt_base bench_transformer; do
  VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
    timeout 60 ~/$v --step-only --step-precision half > "$o/detail-$v-half.txt" 2>&1
  echo "== $v half"
  grep -E "_B64 |elementwise x0 grid|adam|one step|profile" "$o/detail-$v-half.txt"
done
for r in 1 2 3 4; do
  for v in bt_base bench_transformer; do
    echo "== $v round $r"
    timeout 40 ~/$v --step-only --step-precision half 2>&1 | grep -E "_B64 "
  done
done
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep "ms "
date -u
