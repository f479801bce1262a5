#!/usr/bin/env bash
# scripts/nccl_rank_host.sh CMD...: runs CMD as a host of its own in NCCL's eyes, so that several MPI processes on
# one GPU can form NCCL communicators (for tests on a machine with one GPU):
#
#   mpirun -np 2 -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1 bash scripts/nccl_rank_host.sh ./train_gpt_cu --comm nccl ...
#
# NCCL refuses a communicator with two ranks on one GPU of one host ("Duplicate GPU detected"), and tells hosts apart
# by a hash of NCCL_HOSTID when that is set (else of the host name and the kernel's boot id). Each process here sets
# NCCL_HOSTID to the host name and its MPI rank, so to NCCL each is a machine with one GPU: it connects them through
# its network transport (sockets; over the loopback interface with NCCL_SOCKET_IFNAME=lo, and NCCL_IB_DISABLE=1 keeps
# it off InfiniBand cards), as it connects machines, and each collective, send and receive runs NCCL's kernels on the
# shared GPU. What this cannot show: NVLink and PCIe peer-to-peer transfers, and the speed of several GPUs.
# train_gpt applies NCCL's rule itself before NCCL does (comm_nccl_shared_device), so --comm nccl runs and --comm
# auto takes NCCL under this wrapper. (NCCL 2.30 and later also take NCCL_MULTI_RANK_GPU_ENABLE=1 instead.)
set -eu
rank="${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-}}}"
if [ -z "$rank" ]; then
    echo "nccl_rank_host.sh: no MPI rank in the environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK): run it under mpirun" >&2
    exit 2
fi
[ $# -gt 0 ] || { echo "nccl_rank_host.sh: no command to run" >&2; exit 2; }
export NCCL_HOSTID="$(hostname)-rank$rank"
exec "$@"
