#!/usr/bin/env bash
# scripts/bench_pp.sh: pipeline parallelism (make bench-pp) on one machine: every schedule with pp 2 (two processes,
# half the cores each) on the same model, batch, micro-batches and cores, against one process on all the cores.
# One row each: ms/step, tokens/s, the activation memory each stage allocates (its slots for the micro-batches in
# flight and the shared scratch: what the schedule's memory bound costs), all memory per stage, and the bubble:
# measured (the share of the forward/backward phase a rank waits, mean over ranks) and the schedule's theory.
#
#   bash scripts/bench_pp.sh [MODEL [B [T [M [STEPS]]]]]   default: d12 (GPT-2 124M), B 2, T 64, 8 micro-batches, 2 steps
#
# On one CPU the two stages share the cores and the memory bus: the figures show the schedules' memory and bubbles,
# not a speed-up (which needs a device per stage).
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-d12}
B=${2:-2}
T=${3:-64}
M=${4:-8}
STEPS=${5:-2}
[ -x ./train_gpt ] || { echo "bench_pp: ./train_gpt is missing: run make first" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "bench_pp: mpirun is missing (apt-get install openmpi-bin)" >&2; exit 1; }
CORES=$(nproc)
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none"
threads=$((CORES / 2)); [ "$threads" -ge 1 ] || threads=1
common=(--bench 1 --model "$MODEL" --batch-size "$B" --seq-len "$T" --micro-batches "$M" --bench-steps "$STEPS")
printf "%-26s | %9s | %8s | %-25s | %-25s | %s\n" layout ms/step tokens/s "activations (stage 0 / 1)" "memory (stage 0 / 1)" "bubble measured / theory"
# the memory table's row of a rank: activations and total
col() { echo "$1" | awk -v r="$2" -v c="$3" -F'|' '$1 ~ "^ +"r" $" { gsub(/^ +| +$/, "", $c); print $c }'; }
for cfg in "1 -" "2 gpipe" "2 1f1b" "2 interleaved"; do
    read -r pp sched <<<"$cfg"
    if [ "$pp" = 1 ]; then
        out=$(env -u OPENBLAS_CORETYPE ./train_gpt "${common[@]}" --threads "$CORES" 2>&1) || { echo "$out" >&2; exit 1; }
        name="1 process x $CORES thread(s)"
        acts="$(col "$out" 0 5)"; mem="$(col "$out" 0 6)"; bubble="-"
    else
        extra=(--pp 2 --pp-schedule "$sched")
        [ "$sched" = interleaved ] && extra+=(--virtual-stages 2)
        out=$(env -u OPENBLAS_CORETYPE $MPIRUN -np 2 ./train_gpt "${common[@]}" --threads "$threads" "${extra[@]}" 2>&1) || { echo "$out" >&2; exit 1; }
        name="pp 2 $sched"; [ "$sched" = interleaved ] && name="$name (2 chunks/rank)"
        acts="$(col "$out" 0 5) / $(col "$out" 1 5)"; mem="$(col "$out" 0 6) / $(col "$out" 1 6)"
        bubble=$(echo "$out" | grep -m1 '^pipeline: bubble' | sed 's/.*measured \([0-9.]*%\).*theory \([0-9.]*%\).*/\1 \/ \2/')
    fi
    row=$(echo "$out" | grep -m1 '^bench-row:')
    read -r _ _ _ _ _ _ ms _ tps _ <<<"$row"
    printf "%-26s | %9s | %8s | %-25s | %-25s | %s\n" "$name" "$ms" "$tps" "$acts" "$mem" "$bubble"
done
