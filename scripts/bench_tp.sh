#!/usr/bin/env bash
# scripts/bench_tp.sh: tensor parallelism (make bench-tp) on one machine: tp 1 (one process on every core) against tp 2
# (two processes, half the cores each), with and without sequence parallelism, on the same model, batch and cores.
# One row each: ms/step, tokens/s, memory per rank (what the trainer allocates for parameters, gradients, optimizer
# state and activations: the split shows), peak RSS per rank, and the bytes each rank sends per step on its
# tensor-parallel group (the ring model of comm.h: an all-reduce of N bytes sends 2 (p-1)/p N), then the breakdown by
# collective of the last tp 2 run.
#
#   bash scripts/bench_tp.sh [MODEL [B [T [STEPS]]]]     default: d12 (GPT-2 124M), B 4, T 64, 3 timed steps
#
# On one CPU the ranks share the cores and the memory bus and the collectives are memory copies: tensor parallelism
# does not pay here (it splits matmuls that already use every core); the figures show what it costs and what it saves.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-d12}
B=${2:-4}
T=${3:-64}
STEPS=${4:-3}
[ -x ./train_gpt ] || { echo "bench_tp: ./train_gpt is missing: run make first" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "bench_tp: mpirun is missing (apt-get install openmpi-bin)" >&2; exit 1; }
CORES=$(nproc)
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
printf "%-24s | %10s | %10s | %14s | %14s | %14s | %s\n" layout ms/step tokens/s "memory/rank" "params/rank" "peak RSS/rank" "tp sends/rank/step"
last=""
for cfg in "1 0" "2 0" "2 1"; do
    read -r tp sp <<<"$cfg"
    threads=$((CORES / tp)); [ "$threads" -ge 1 ] || threads=1
    args=(--bench 1 --model "$MODEL" --batch-size "$B" --seq-len "$T" --bench-steps "$STEPS" --threads "$threads")
    if [ "$tp" = 1 ]; then
        out=$(env -u OPENBLAS_CORETYPE ./train_gpt "${args[@]}" 2>&1) || { echo "$out" >&2; exit 1; }
    else
        out=$(env -u OPENBLAS_CORETYPE $MPIRUN -np "$tp" ./train_gpt "${args[@]}" --tp "$tp" --sequence-parallel "$sp" 2>&1) || { echo "$out" >&2; exit 1; }
        last="$out"
    fi
    row=$(echo "$out" | grep -m1 '^bench-row:')
    read -r _ _ _ _ _ _ ms _ tps _ _ _ _ _ rb _ pb <<<"$row"
    rss=$(echo "$out" | grep -m1 'peak RSS per rank' | sed 's/.*peak RSS per rank //')
    tpb=$(echo "$out" | grep -m1 '^bench-comm:' | awk '{print $5}' || true)
    name="tp $tp x $threads thread(s)"; [ "$sp" = 1 ] && name="$name, sp"
    printf "%-24s | %10s | %10s | %14s | %14s | %14s | %s\n" "$name" "$ms" "$tps" "$(mb "$rb")" "$(mb "$pb")" "$rss" "$(mb "${tpb:-0}")"
done
echo "# the collectives of the last run (tp 2, sequence parallel), per rank and step:"
echo "$last" | grep '^bench: tp group' | sed 's/^bench: /#   /'
