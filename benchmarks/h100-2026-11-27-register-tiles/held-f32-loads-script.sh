set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/new/bt_new.gz > ~/bt; chmod +x ~/bt
gunzip -c .device/new/ts.gz > ~/ts && chmod +x ~/ts
VOLTA_COOP_HOLD_F32=1 ~/ts gpu_tensor_cores 2>&1 | grep -E "test result|FAIL|panicked" | head | tee $OUT/tests.txt
for r in 1 2; do
 echo "== base"; timeout 100 ~/bt --products half 2>&1 | grep -E "^product"
 echo "== hold"; VOLTA_COOP_HOLD_F32=1 timeout 100 ~/bt --products half 2>&1 | grep -E "^product"
done 2>&1 | tee $OUT/products.txt
for r in 1 2; do
 echo "== base"; timeout 100 ~/bt --step-only 2>&1 | grep -E "^gpt_step.*Half"
 echo "== hold"; VOLTA_COOP_HOLD_F32=1 timeout 100 ~/bt --step-only 2>&1 | grep -E "^gpt_step.*Half"
done 2>&1 | tee $OUT/step.txt
date -u
