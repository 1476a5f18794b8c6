set -u
source .device/gpu-env.sh >/dev/null
date -u
gunzip -c .device/new/ts.gz > ~/ts && chmod +x ~/ts
~/ts gpu_parity gpu_tensor_cores attention layers_gpu optim_gpu model 2>&1 | grep -E "test result|FAIL|panicked" | head | tee $OUT/tests.txt
OUT=$OUT bash scripts/device/bench-transformer.sh
date -u
