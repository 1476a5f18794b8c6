# A norm's rows that the backward keeps written with their affine by one
# kernel, against the build before, in one call. Binaries under .device/bin:
# bt_base.gz (main at 38c8e04), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
# The raw output in raw/ came from this probe's first form, which ran the same
# steps inline (see git history); it now calls the shared A/B script.
TESTS="gpu_parity gpu_tensor_cores layers_gpu attention" DETAIL="half full" DETAIL_GREP='normalize rows|\(\(x2 \* x0\) \+ x1\)' ROWS="--step-only" \
  PEER_ARGS=--step-only bash scripts/device/binaries-ab.sh 3 bt_base.gz bench_transformer.gz
