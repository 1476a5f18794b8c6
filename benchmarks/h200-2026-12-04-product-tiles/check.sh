# The narrowed rule (eight-subgroup tiles for 257 to 384 large tiles, not kept): the
# tensor-core tests, then the probe's default against the four-subgroup tiles.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/test_suite.gz > ~/suite && chmod +x ~/suite
gunzip -c .device/bin/bench_gpu.gz > ~/bg && chmod +x ~/bg
timeout 200 ~/suite tensor_cores half 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
VOLTA_PROBE_SIZES=4096 VOLTA_PROBE_COOP="default" timeout 60 ~/bg --probe > /dev/null 2>&1
export VOLTA_PROBE_SIZES=2048,12288x768x384,16384x1536x384,16384x384x384
export VOLTA_PROBE_COOP="default;2,2,4,4,32,8,P"
for r in 1 2; do timeout 120 ~/bg --probe > $o/probe-$r.txt 2>&1; done
paste -d'|' <(grep -E "^f16" $o/probe-1.txt) <(grep -E "^f16" $o/probe-2.txt | awk '{print $NF, $(NF-2)}')
