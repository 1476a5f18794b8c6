#!/usr/bin/env bash
# The driver's statistics (registers, shared memory, spills) for every kernel the
# GEMM rows and sweeps compile: bench_gpu dumps the WGSL (VOLTA_DUMP_WGSL), then
# shader_stats compiles each with VK_KHR_pipeline_executable_properties.
# Carry .device/{gl,gpu-env.sh,bin}.
set -u
source .device/gpu-env.sh >/dev/null
mkdir -p ~/o; rm -rf ~/o/* ~/k
for b in bench_gpu shader_stats; do gunzip -c .device/bin/$b.gz > ~/$b && chmod +x ~/$b; done
VOLTA_DUMP_WGSL=~/k timeout ${BENCH_S:-200} ~/bench_gpu ${BENCH_ARGS:---gemm} > ~/o/bench_gpu.txt 2>&1
ls ~/k | wc -l
timeout 200 ~/shader_stats ~/k --ir ~/o/ir > ~/o/stats.txt 2>&1
cp -r ~/k ~/o/wgsl
tar czf "$OUT/out.tgz" -C ~/o .
grep -v "^0[0-9][0-9]-elementwise" ~/o/stats.txt | cut -c1-400 | head -80
