set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
date -u
VOLTA_PROFILE_DETAIL=1 VOLTA_BENCH_KERNELS=all timeout 200 ~/bt --step-only > $o/detail.txt 2>&1
grep -E "_B64 " $o/detail.txt
timeout 200 python3 scripts/device/transformer_peers.py --step-only --profile-step > $o/torch.txt 2>&1
tail -60 $o/torch.txt
date -u
