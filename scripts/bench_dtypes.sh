#!/usr/bin/env bash
# scripts/bench_dtypes.sh: the training-step benchmark (make bench) for every storage type x recompute mode, one
# row each: ms/step, tokens/s, activation bytes (allocated by this build, and with 16-bit storage as a GPU build
# allocates them). The same model, batch and kernels in every row, run one after the other on this machine.
#
#   bash scripts/bench_dtypes.sh [MODEL [B [T [STEPS]]]]     default: d12 (GPT-2 124M), B 4, T 64, 5 timed steps
#
# On the CPU, bf16 and fp16 are emulated (fp32 arithmetic, every 16-bit store rounded), so their rows measure the
# cost of the emulation, not a speed-up; the GPU build is where 16-bit storage pays.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-d12}
B=${2:-4}
T=${3:-64}
STEPS=${4:-5}
[ -x ./train_gpt ] || { echo "bench_dtypes: ./train_gpt is missing: run make first" >&2; exit 1; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
first=1
header() { printf "%-6s | %-9s | %10s | %10s | %-22s | %s\n" dtype recompute ms/step tokens/s "activations (here)" "activations (16-bit storage)"; }
for dtype in fp32 bf16 fp16; do
    for rc in 0 1 2; do
        # OpenBLAS chooses its kernels (the trainer may replace a generic choice), as in every other figure
        out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./train_gpt --bench 1 --model "$MODEL" --batch-size "$B" \
              --seq-len "$T" --bench-steps "$STEPS" --dtype "$dtype" --recompute "$rc" 2>&1) || { echo "$out" >&2; exit 1; }
        if [ $first = 1 ]; then
            echo "$out" | grep -m1 '^bench: .*matmuls' | sed 's/^bench: /# /; s/, --dtype fp32, --recompute 0 (activations [^)]*)//'
            header
            first=0
        fi
        row=$(echo "$out" | grep -m1 '^bench-row:')
        read -r _ _ dt _ r _ ms _ tps _ ab _ db <<<"$row"
        printf "%-6s | %-9s | %10s | %10s | %-22s | %s\n" "$dt" "$r" "$ms" "$tps" "$(mb "$ab")" "$(mb "$db")"
    done
done
