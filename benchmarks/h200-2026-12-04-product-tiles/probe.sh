# Tensor-core tile shapes at the GPT step's product sizes (bench_gpu --probe).
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_gpu.gz > ~/bg && chmod +x ~/bg
# Heat the GPU first: idle clocks made early rows slow (2026-12-04).
VOLTA_PROBE_SIZES=4096 VOLTA_PROBE_COOP="default" timeout 60 ~/bg --probe > /dev/null 2>&1
export VOLTA_PROBE_SIZES=${SIZES:-16384x384x1152,16384x1536x384,16384x384x1536,384x16384x1536,4096}
export VOLTA_PROBE_COOP=${COOP:-"default;2,2,4,4,32,8,P;2,2,4,4,64,8,P;2,2,4,4,64,8,D;2,2,4,4,64,0,P;2,4,4,4,32,8,P;4,2,2,4,32,8,P;4,2,2,4,64,8,P;2,4,4,2,32,8,P;4,4,2,2,32,8,P;2,2,4,4,16,8,P;2,4,2,4,32,8,P;2,2,4,8,32,8,P"}
for r in 1 2; do
  timeout 250 ~/bg --probe > $o/probe-$r.txt 2>&1
done
paste -d'|' <(grep -E "^f16|skip" $o/probe-1.txt) <(grep -E "^f16|skip" $o/probe-2.txt | awk '{print $NF, $(NF-2)}')
