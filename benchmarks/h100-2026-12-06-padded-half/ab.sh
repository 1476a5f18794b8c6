#!/usr/bin/env bash
# The final build of the padded tensor-core kernels: the suite's attention and
# tensor-core tests, then main before them (bt_old, 799fa03) against this
# build (bt_new), alternating, three rounds: the attention rows (causal, no
# padding; then bt_new's padded rows) and the GPT step in half precision, each
# step's kernels listed; then the driver's registers for both builds' kernels.
# Carry .device/{gl,gpu-env.sh,bin/{bt_old,bt_new,test_suite,shader_stats}.gz}.
set -u
source .device/gpu-env.sh >/dev/null
o=${OUT:-/tmp}
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in bt_old bt_new test_suite; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
timeout 200 ~/test_suite attention tensor_cores 2>&1 | grep -E "panicked|error|test result" | tee "$o/tests.txt"
for r in 1 2 3; do
  for b in bt_old bt_new; do
    echo "== $b, round $r"
    timeout 120 ~/$b --attention-only --lengths 8x1024,2x4096 2>&1 > "$o/attn-$b-$r.txt"
    grep -E "fwd_bwd|fwd_half" "$o/attn-$b-$r.txt"
    VOLTA_BENCH_KERNELS=1 timeout 120 ~/$b --step-only --step-precision half 2>&1 > "$o/step-$b-$r.txt"
    grep -E "Half_B64 |flash_attention" "$o/step-$b-$r.txt"
  done
  timeout 120 ~/bt_new --attention-only --lengths 8x1024,2x4096 --padding 256 2>&1 > "$o/attn-padded-$r.txt"
  grep -E "fwd_bwd" "$o/attn-padded-$r.txt"
done
date -u
# The driver's registers and spills for both builds' attention kernels
# (carry .device/bin/shader_stats.gz too).
if [ -f .device/bin/shader_stats.gz ]; then
  gunzip -c .device/bin/shader_stats.gz > ~/shader_stats && chmod +x ~/shader_stats
  for b in bt_old bt_new; do
    rm -rf ~/k-$b
    VOLTA_DUMP_WGSL=~/k-$b timeout 120 ~/$b --attention-only --lengths 2x256 > /dev/null 2>&1
    timeout 200 ~/shader_stats ~/k-$b > "$o/stats-$b.txt" 2>&1
    echo "== $b"; grep -i "attention" "$o/stats-$b.txt" | cut -c1-300
  done
fi
