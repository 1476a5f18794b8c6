#!/usr/bin/env bash
# The driver's register counts for the tensor-core products of the GPT step:
# bench_transformer --products half dumps their WGSL (VOLTA_DUMP_WGSL) and
# shader_stats compiles it through VK_KHR_pipeline_executable_properties.
# Carry .device/{gl,gpu-env.sh,bin/bench_transformer.gz,bin/shader_stats.gz}.
set -u
source .device/gpu-env.sh >/dev/null
for b in bench_transformer shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
rm -rf ~/k ~/a && mkdir -p ~/a
VOLTA_DUMP_WGSL=~/k timeout 200 ~/bench_transformer --products half > /dev/null 2>&1
ls ~/k
for f in ~/k/*; do case "$f" in *tensor*|*coop*) cp "$f" ~/a/;; esac; done
timeout 200 ~/shader_stats ~/a 2>&1 | tee "${OUT:-/tmp}/registers.txt" | cut -c1-250
