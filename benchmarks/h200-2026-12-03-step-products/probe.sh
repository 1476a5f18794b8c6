set -u
source .device/gpu-env.sh >/dev/null
gunzip -c .device/bin/bench_gpu.gz > ~/bg && chmod +x ~/bg
export VOLTA_PROBE_SIZES=16384x1152x384,16384x384x384,16384x1536x384,16384x384x1536
export VOLTA_PROBE_F32="default;128,128,16,8,8,W,0;128,128,16,8,8,W,8;128,128,16,8,8,P,8;128,128,32,8,8,P,8;128,128,8,8,8,W,8;128,64,16,8,8,W,8;256,128,16,16,8,P,8;128,128,16,16,8,W,8;128,128,16,8,16,P,8;64,128,16,8,8,W,8;128,256,16,8,16,P,8;256,128,8,16,8,P,8;128,128,8,16,8,P,8"
timeout 280 ~/bg --probe 2>&1 | tee ${OUT:-/tmp}/probe.txt
