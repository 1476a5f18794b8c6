#!/usr/bin/env bash
# The driver's register counts for the attention kernels: bench_transformer
# --attention-only dumps every kernel's WGSL (VOLTA_DUMP_WGSL), with and without
# the one-launch backward, and shader_stats compiles the attention ones through
# VK_KHR_pipeline_executable_properties. Carry .device/{gl,gpu-env.sh,
# bin/bench_transformer.gz,bin/shader_stats.gz}.
set -u
source .device/gpu-env.sh >/dev/null
for b in bench_transformer shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
rm -rf ~/k ~/k2 ~/a && mkdir -p ~/a
VOLTA_DUMP_WGSL=~/k timeout 200 ~/bench_transformer --attention-only > /dev/null 2>&1
VOLTA_GPU_DISABLE=shader-float32-atomic VOLTA_DUMP_WGSL=~/k2 timeout 200 ~/bench_transformer --attention-only > /dev/null 2>&1
for f in ~/k/*flash* ~/k2/*flash*; do cp "$f" ~/a/$(basename $(dirname "$f"))-$(basename "$f"); done
ls ~/a
timeout 200 ~/shader_stats ~/a 2>&1 | tee "${OUT:-/tmp}/registers.txt" | cut -c1-300
