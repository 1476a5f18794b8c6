set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
gunzip -c .device/bin/bench_transformer.gz > ~/bt && chmod +x ~/bt
VOLTA_BENCH_KERNELS=1 timeout 150 ~/bt --products 2>&1 | tee $o/volta-1.txt
PYTHONUNBUFFERED=1 timeout 150 python3 scripts/device/transformer_peers.py --products 2>&1 | tee $o/torch.txt
VOLTA_BENCH_KERNELS=1 timeout 150 ~/bt --step-only 2>&1 | tee $o/volta-step.txt
