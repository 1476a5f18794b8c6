set -u
source .device/gpu-env.sh >/dev/null
date -u
for b in old new; do gunzip -c .device/new/bt_$b.gz > ~/$b; chmod +x ~/$b; done
for r in 1 2 3; do for v in old new; do echo "== $v"; timeout 100 ~/$v --step-only 2>&1 | grep -E "^gpt_step|profile \("; done; done 2>&1 | tee $OUT/ab-step.txt
VOLTA_BENCH_KERNELS=all timeout 100 ~/new --step-only > $OUT/step-kernels-new.txt 2>&1
date -u
