#!/usr/bin/env bash
# scripts/bench_multihost.sh: collective bandwidth across hosts next to within one host (make bench-multihost).
# Runs bench_comm (allreduce, reduce-scatter, allgather, sendrecv; 1 KB to 64 MB) twice with 2 ranks: both on this
# host (shared memory), then one on each of 2 "hosts" made of network namespaces (scripts/multihost.sh: TCP over a
# veth pair and a bridge, all in the kernel), and prints both tables and their average bus bandwidth. Over real
# machines the network is slower; the second table shows what the TCP path costs before any wire does. Needs root
# for the namespaces (skipped otherwise, saying why).
set -u
cd "$(dirname "$0")/.." || exit 1
ARGS=(--min-bytes 1K --max-bytes 64M --factor 8 --iters 10 --warmup 3 --op "${BENCH_OPS:-allreduce,reduce_scatter,allgather,sendrecv}")
[ -x ./bench_comm ] || { echo "bench_multihost: build bench_comm first (make bench_comm)"; exit 1; }
echo "=== 2 ranks on one host (shared memory)"
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ./bench_comm "${ARGS[@]}"
echo "=== 2 hosts x 1 rank (TCP between network namespaces)"
MULTIHOST_MPIRUN_ARGS="-x OMP_NUM_THREADS=1" bash scripts/multihost.sh --hosts 2 --per-host 1 --timeout 600 -- ./bench_comm "${ARGS[@]}"
rc=$?
[ $rc -eq 77 ] && exit 0
exit $rc
