# A norm that computes the residual stream in its loads writes the stream as it
# loads it, against the build before, in one call. Binaries under .device/bin:
# bt_base.gz (main at 6d892ec), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
# The raw output in raw/ came from this probe's first form, which ran the same
# steps inline (see git history); it now calls the shared A/B script.
TESTS="gpu_parity gpu_tensor_cores layers_gpu attention" DETAIL="half full" DETAIL_GREP='normalize rows|ge\(u2, s0\)' ROWS="--step-only" \
  PEER_ARGS=--step-only bash scripts/device/binaries-ab.sh 6 bt_base.gz bench_transformer.gz
