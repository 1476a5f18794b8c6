# (Run on the build before `--copy-reads`: its knob was `--round-in-memory BYTES`.)
# Half precision's operands in memory: rounded in the products' loads (0), by a
# kept copy when at most 8 MiB (the weights), or every size (the default); the
# GPU tests of tensor cores first, and the write-in-place test against a build
# whose writes in place keep the stale copy (it must fail).
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
for b in bench_transformer suite suite-mut; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 120 ~/suite tensor_cores attention_gpu optim_gpu layers_gpu gpu_parity model_sequences 2>&1 | tail -8 | tee "$o/tests.txt"
timeout 60 ~/suite-mut follow_writes_in_place 2>&1 | tail -12 | tee "$o/tests-mutated.txt"
for round in 1 2; do
  for bytes in 0 8388608 default; do
    flag=""; [ $bytes != default ] && flag="--round-in-memory $bytes"
    VOLTA_BENCH_KERNELS=1 timeout 80 ~/bench_transformer --step-only --step-precision half $flag 2>&1 | tee "$o/step-$bytes-$round.txt" | grep -E "gpt_step|matmul|elementwise x0|profile"
  done
done
