#!/usr/bin/env bash
# Downloads Debian's Open MPI runtime and the libraries it needs beyond a base
# system into .device/mpi, for the GPU machine (which has no Open MPI): bench-ddp.sh
# unpacks them there with `dpkg -x`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device/mpi
cd .device/mpi
apt-get download openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 \
    libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 \
    librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1 libpsm2-2 libpsm-infinipath1 \
    libmunge2 libxnvctrl0 libatomic1 libbsd0 libmd0 libpciaccess0 libx11-6 libxext6 \
    libxcb1 libxau6 libxdmcp6 libltdl7 libgfortran5 libquadmath0 ibverbs-providers
du -sh .
