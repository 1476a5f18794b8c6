set -u
source .device/gpu-env.sh >/dev/null
date -u
for b in old new; do gunzip -c .device/new/bt_$b.gz > ~/$b; chmod +x ~/$b; done
gunzip -c .device/new/shader_stats.gz > ~/ss && chmod +x ~/ss
~/ss .device/new/k 2>&1 | tee $OUT/stats.txt
for r in 1 2; do
  echo "== old"; timeout 100 ~/old --attention-only 2>&1 | grep -E "f32"
  for st in 2,2,1,1 2,1,1,1 1,2,1,1 1,1,1,1 1,1,2,1; do echo "== new $st"; VOLTA_ATTENTION_STRIPS=$st timeout 100 ~/new --attention-only 2>&1 | grep -E "f32"; done
done 2>&1 | tee $OUT/ab-attention.txt
date -u
