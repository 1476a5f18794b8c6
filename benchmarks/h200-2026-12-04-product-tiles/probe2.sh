# Eight-subgroup tiles with K steps of 64 against the default at grids of
# 384 to 1536 workgroups (bench_gpu --probe; forced tiles never split K).
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_gpu.gz > ~/bg && chmod +x ~/bg
VOLTA_PROBE_SIZES=4096 VOLTA_PROBE_COOP="default" timeout 60 ~/bg --probe > /dev/null 2>&1
export VOLTA_PROBE_SIZES=16384x384x384,16384x1152x384,16384x1536x384,8192x1024x1024,3072x1024x3072,16384x1024x768,16384x384x1152
export VOLTA_PROBE_COOP="2,2,4,4,32,8,P;4,2,2,4,64,8,P;4,2,2,4,48,8,P;2,4,4,2,64,8,P;4,4,2,2,64,8,P;4,2,2,4,64,16,P;4,2,2,4,64,4,P"
for r in 1 2; do
  timeout 250 ~/bg --probe > $o/probe-$r.txt 2>&1
done
paste -d'|' <(grep -E "^f16|skip" $o/probe-1.txt) <(grep -E "^f16|skip" $o/probe-2.txt | awk '{print $NF, $(NF-2)}')
