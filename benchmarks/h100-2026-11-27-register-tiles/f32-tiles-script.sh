set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/new/bg.gz > ~/bg; chmod +x ~/bg
V="default;128,128,8,16,8,P,8;128,128,16,16,8,P,8;128,128,8,8,8,P,8;128,64,8,8,8,P,8;64,128,8,8,8,P,8;128,128,8,16,8,W,8;256,64,8,16,8,P,8;128,64,16,16,8,P,8;128,128,16,8,8,P,8;64,64,8,8,8,P,8"
for r in 1 2; do
VOLTA_PROBE_SIZES=16384x384x384,16384x384x1536,16384x1536x384,16384x384x1152 VOLTA_PROBE_F32="$V" timeout 250 ~/bg --probe 2>&1 | grep -E "^f32|skip"
done 2>&1 | tee $OUT/f32-probe.txt
date -u
