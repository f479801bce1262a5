#!/usr/bin/env bash
# scripts/bench_threads.sh: how OpenMP's idle threads should wait (kernels_cpu.h, kernels_runtime_select). The
# training-step benchmark (--bench 1, ms/step) for three model sizes, on this machine idle and beside a program that
# keeps one core busy (a shell loop, as a browser tab or a second run would), under each way of waiting:
#   default  libgomp's own: OMP_WAIT_POLICY unset, 300,000 spins before a thread sleeps (GOMP_SPINCOUNT=300000)
#   N        GOMP_SPINCOUNT=N (the trainer sets 1000 unless the environment names a policy)
#   passive  OMP_WAIT_POLICY=passive: a thread sleeps at once
#
#   bash scripts/bench_threads.sh [THREADS [COUNTS]]     default: every core; COUNTS "100 1000 10000"
#
# The sizes: the tests' reference model (tests/ref/ref_model.bin: L 2, C 32; B 8, T 16: about a millisecond a step,
# where the waiting is most of it), the default job's d4 (B 8, T 64) and GPT-2 124M (d12, B 4, T 64). One run per
# cell, one after the other: this machine is noisy, so read the columns side by side and rerun to see the spread.
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${1:-$(nproc)}
COUNTS=${2:-100 1000 10000}
[ -x ./train_gpt ] || { echo "bench_threads: ./train_gpt is missing: run make first" >&2; exit 1; }
policies=(default $COUNTS passive)
env_of() {
    case "$1" in
        default) echo "GOMP_SPINCOUNT=300000" ;;
        passive) echo "OMP_WAIT_POLICY=passive" ;;
        *) echo "GOMP_SPINCOUNT=$1" ;;
    esac
}
# cell MODEL_ARGS STEPS POLICY: ms/step of one benchmark run (OpenBLAS's own kernel choice, as in every figure)
cell() {
    local out
    out=$(env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u GPT_TRAINER_OMP_SPIN $(env_of "$3") \
          ./train_gpt --bench 1 $1 --bench-steps "$2" --threads "$THREADS" 2>&1) || { echo "$out" >&2; exit 1; }
    echo "$out" | awk '/^bench-row:/ { for (i = 1; i < NF; i++) if ($i == "ms") { printf "%.1f", $(i + 1); exit } }'
}
hog=""
stop_hog() { [ -n "$hog" ] && kill "$hog" 2> /dev/null; wait 2> /dev/null || true; hog=""; }
trap stop_hog EXIT
echo "# --bench 1, ms/step, $THREADS thread(s), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) core(s); columns: how idle threads wait"
printf '%-34s' "model | machine"
for p in "${policies[@]}"; do printf ' | %9s' "$p"; done
echo
for load in idle "one core busy"; do
    if [ "$load" != idle ]; then bash -c 'while :; do :; done' & hog=$!; fi
    for m in "ref:--init tests/ref/ref_model.bin --batch-size 8 --seq-len 16:200" "d4:--model d4 --batch-size 8 --seq-len 64:10" \
             "d12:--model d12 --batch-size 4 --seq-len 64:3"; do
        name=${m%%:*}; rest=${m#*:}; args=${rest%:*}; steps=${rest##*:}
        printf '%-34s' "$name | $load"
        for p in "${policies[@]}"; do printf ' | %9s' "$(cell "$args" "$steps" "$p")"; done
        echo
    done
    stop_hog
done
