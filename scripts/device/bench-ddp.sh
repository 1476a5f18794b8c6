#!/usr/bin/env bash
# The data-parallel rows in one call on a GPU machine with two GPUs
# (nvidia-h100-x2): bench_ddp at one and two ranks (mpirun), PyTorch DDP over
# NCCL at one and two processes (ddp_peers.py), then bench_ddp at two ranks
# again. Open MPI is not installed there: Debian's packages are carried in
# .device/mpi (scripts/device/fetch-mpi-debs.sh) and unpacked as the Vulkan loader
# is. Carry .device/{gl,gpu-env.sh,mpi,bin/bench_ddp.gz}.
set -u
source .device/gpu-env.sh >/dev/null
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for f in .device/mpi/*.deb; do dpkg -x "$f" /; done
ldconfig
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The machine's own PMIx plugins (Ubuntu's) do not fit Debian's libpmix: without
# this, mpirun crashes in pmix_preg_base_generate_ppn (seen 2026-11-26).
export PMIX_MCA_preg=native
# One host: Open MPI's local launcher, no ssh.
mpi=(mpirun --mca plm isolated --bind-to none)
gunzip -c .device/bin/bench_ddp.gz > ~/bench_ddp && chmod +x ~/bench_ddp
out="${OUT:-/tmp}"
# The parts of the communication alone: read-back, upload, MPI's all-reduce.
timeout 60 "${mpi[@]}" -np 2 ~/bench_ddp --transfers 2>&1 | grep -v '^\[' | tee "$out/transfers.txt"
timeout 150 "${mpi[@]}" -np 1 ~/bench_ddp 2>&1 | tee "$out/volta-np1.txt"
timeout 150 "${mpi[@]}" -np 2 ~/bench_ddp 2>&1 | tee "$out/volta-np2.txt"
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/device/ddp_peers.py --world 1 2>&1 | tee "$out/torch-np1.txt"
PYTHONUNBUFFERED=1 timeout 120 python3 scripts/device/ddp_peers.py --world 2 2>&1 | tee "$out/torch-np2.txt"
timeout 150 "${mpi[@]}" -np 2 ~/bench_ddp 2>&1 | tee "$out/volta-np2-again.txt"
