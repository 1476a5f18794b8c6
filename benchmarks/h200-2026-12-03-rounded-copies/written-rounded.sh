# The GPU tests of tensor cores, the optimiser and attention, then the half
# step of three builds alternating three times: base (weights rounded by copy
# kernels), adam (Adam writes each new weight's f16 copy), both (and the
# tensor-core attention forward writes its output's, as vec4<f16>).
set -u
source .device/gpu-env.sh >/dev/null
date -u
o=${OUT:-/tmp}
for b in bt-base bt-adam bt-both suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 100 ~/suite tensor_cores optim_gpu attention_gpu 2>&1 | grep -E "^test |result" | tee "$o/tests.txt" | grep -v " ok$"
for round in 1 2 3; do
  for b in bt-base bt-adam bt-both; do
    VOLTA_BENCH_KERNELS=1 timeout 60 ~/$b --step-only --step-precision half 2>&1 > "$o/$b-$round.txt"
    echo "$b $(grep -h gpt_step_shakespeare "$o/$b-$round.txt" | awk '{print $2}') $(grep -h profile "$o/$b-$round.txt" | cut -c1-40) $(grep -hE "matmul|flash_attention tensor-core$|adam|elementwise x0" "$o/$b-$round.txt" | awk '{printf "%s/%s ", $1, $3}')"
  done
done
date -u
