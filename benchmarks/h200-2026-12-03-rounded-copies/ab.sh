# The GPU tests on the H200 (tensor cores), the write-in-place test against a
# build whose writes in place keep the stale f16 copy (it must fail), then the
# GPT step of the build before (base: weights' copies, the gradients of q, k
# and v concatenated by copies) and after (new: those gradients written into one
# buffer), alternating twice, with their kernel profiles.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bench_transformer-base bench_transformer-new suite suite-mut; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 150 ~/suite tensor_cores attention_gpu layers_gpu model_sequences gpu_parity optim_gpu 2>&1 | tail -8 | tee "$o/tests.txt"
timeout 60 ~/suite-mut follow_writes_in_place 2>&1 | tail -14 | tee "$o/tests-mutated.txt"
for round in 1 2; do
  for b in bench_transformer-base bench_transformer-new; do
    VOLTA_BENCH_KERNELS=1 timeout 100 ~/$b --step-only 2>&1 | tee "$o/$b-$round.txt" | grep -E "gpt_step|matmul|elementwise x0|profile"
  done
done
date -u
