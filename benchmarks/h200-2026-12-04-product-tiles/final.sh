# On the build with the eight-subgroup tiles from 256 tiles: products of 256
# to 384 tiles against the four-subgroup ones, then the whole GPU suite, the
# transformer rows against PyTorch and the step in three alternating rounds.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_gpu.gz > ~/bg && chmod +x ~/bg
VOLTA_PROBE_SIZES=4096 VOLTA_PROBE_COOP="default" timeout 60 ~/bg --probe > /dev/null 2>&1
export VOLTA_PROBE_SIZES=2048,2048x4096x2048,4096x1024x1024,16384x384x256,12288x768x384,4096x4096x1536,16384x1536x384
export VOLTA_PROBE_COOP="default;2,2,4,4,32,8,P"
for r in 1 2; do timeout 120 ~/bg --probe > $o/probe-$r.txt 2>&1; done
paste -d'|' <(grep -E "^f16" $o/probe-1.txt) <(grep -E "^f16" $o/probe-2.txt | awk '{print $NF, $(NF-2)}')
unset VOLTA_PROBE_SIZES VOLTA_PROBE_COOP
OUT=$o TESTS="" bash benchmarks/h200-2026-12-04-short-sequences/final/final.sh
