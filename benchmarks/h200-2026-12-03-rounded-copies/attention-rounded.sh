# The tensor-core tests (among them: products of the attention's output read
# its f16 rounding), then the GPT step of the build before (base) and after
# (new: the tensor-core attention forward also writes its output rounded to
# f16, kept for the products that read it), alternating three times.
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bench_transformer-base bench_transformer-new suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 90 ~/suite tensor_cores attention_gpu 2>&1 | grep -E "^test |result" | tee "$o/tests.txt"
for round in 1 2 3; do
  for b in bench_transformer-base bench_transformer-new; do
    VOLTA_BENCH_KERNELS=1 timeout 60 ~/$b --step-only --step-precision half 2>&1 | tee "$o/$b-$round.txt" | grep -E "gpt_step|matmul|elementwise x0|profile"
  done
done
date -u
