# Products that start from their bias (a linear layer's `addmm`), timed against
# the build before them in one call. Binaries under .device/bin: bt_base.gz
# (main at 86734e4 with ../h100-2026-12-07-row-kernels/knobs.patch, whose knobs
# default to main's behaviour), bench_transformer.gz and test_suite.gz (this
# build, release). Carry .device/{bin,gpu-env.sh,gl}.
# The raw output in raw/ came from this probe's first form, which ran the same
# steps inline (see git history); it now calls the shared A/B script.
TESTS="gpu_parity attention tensor_cores layers_gpu optim_gpu" DETAIL="half full" DETAIL_GREP='x0 \+ x1\) grid' ROWS="--step-only" \
  PEER_ARGS=--step-only bash scripts/device/binaries-ab.sh 3 bt_base.gz bench_transformer.gz
# On an H200, the column sums four columns a thread (SerialVec4), which its
# profile suggested: on (1) and off (0), alternating, in the build before
# (~/build1, whose knobs patch reads VOLTA_ROW_QUADS).
case "$(nvidia-smi --query-gpu=name --format=csv,noheader)" in
  *H200*)
    for q in 1 0 1 0; do
      echo "== H200 VOLTA_ROW_QUADS=$q"
      VOLTA_ROW_QUADS=$q VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all \
        timeout 60 ~/build1 --step-only --step-precision half 2>&1 | grep -E "_B64 |sum rows"
    done
    ;;
esac
