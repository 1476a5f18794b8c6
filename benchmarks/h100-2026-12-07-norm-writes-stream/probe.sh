# A norm that computes the residual stream in its loads writes the stream as it
# loads it, against the build before, in one call. Binaries under .device/bin:
# bt_base.gz (main at 6d892ec), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bt_base bench_transformer test_suite; do
  gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b
done
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 ~/test_suite gpu_parity gpu_tensor_cores layers_gpu attention 2>&1 \
  | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for v in bt_base bench_transformer; do
  for p in half full; do
    VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
      timeout 60 ~/$v --step-only --step-precision $p > "$o/detail-$v-$p.txt" 2>&1
    echo "== $v $p"
    grep -E "_B64 |normalize rows|ge\(u2, s0\)|one step|profile" "$o/detail-$v-$p.txt"
  done
done
for r in 1 2 3 4 5 6; do
  for v in bt_base bench_transformer; do
    echo "$v $(timeout 60 ~/$v --step-only 2>&1 | grep -E '_B64 ' | grep -v memory | awk '{print $1, $2}' | tr '\n' ' ')"
  done
done | tee "$o/rounds.txt"
PYTHONUNBUFFERED=1 timeout 60 python3 scripts/device/transformer_peers.py --step-only 2>&1 | grep "ms "
date -u
