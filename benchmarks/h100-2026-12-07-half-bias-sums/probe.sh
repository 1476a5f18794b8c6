# A bias's gradient in half precision summing the f16 copy its products read,
# against the build before, in one call. Binaries under .device/bin:
# bt_base.gz (main at df61712), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
# The raw output in raw/ came from this probe's first form, which ran the same
# steps inline (see git history); it now calls the shared A/B script.
TESTS="gpu_tensor_cores layers_gpu" DETAIL="half" DETAIL_GREP='gelugrad|ge\(u1, s0\)' ROWS="--step-only --step-precision half" \
  PEER_ARGS=--step-only bash scripts/device/binaries-ab.sh 3 bt_base.gz bench_transformer.gz
