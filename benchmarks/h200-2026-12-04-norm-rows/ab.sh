# A norm's rows not written when something else holds them (bt_ln, mc_ln)
# against the build before (bt_after, mc_after: leaf gradients computed during
# the backward pass): the step's memory census (f32, B 64), the GPT step in
# both precisions alternating (two rounds), then the GPU tests of norms,
# layers, tensor cores and attention.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u
for b in after ln; do
  gunzip -c .device/bin/mc_$b.gz > ~/mc_$b && chmod +x ~/mc_$b
  echo "== census $b"; timeout 60 ~/mc_$b 64 2>&1 | tee $o/census-$b.txt
done
ROWS="--step-only" PEER=0 bash scripts/device/binaries-ab.sh 2 bt_after.gz bt_ln.gz > $o/ab.txt 2>&1
grep -E "== build|gpt_step" $o/ab.txt
gunzip -c .device/bin/test_suite.gz > ~/suite && chmod +x ~/suite
timeout 150 ~/suite gpu_parity layers_gpu gpu_tensor_cores attention_gpu model_sequences gpu_backward optim_gpu 2>&1 | grep -E "panicked|FAILED|failed|test result" | tee $o/tests.txt
date -u
