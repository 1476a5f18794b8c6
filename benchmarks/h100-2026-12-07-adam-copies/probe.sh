# Adam writing the f16 copies of the weights that products in half precision
# read, against the build before, in one call. Binaries under .device/bin:
# bt_base.gz (main at eea77c1), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
# The raw output in raw/ came from this probe's first form, which ran the same
# steps inline (see git history); it now calls the shared A/B script.
TESTS="optim_gpu gpu_tensor_cores layers_gpu" DETAIL="half" DETAIL_GREP='elementwise x0 grid|adam' ROWS="--step-only --step-precision half" \
  PEER_ARGS=--step-only bash scripts/device/binaries-ab.sh 4 bt_base.gz bench_transformer.gz
