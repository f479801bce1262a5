#!/usr/bin/env bash
# scripts/bench_llmc_cpu.sh: this trainer's CPU training step beside llm.c's CPU trainer (its train_gpt2.c), one
# after the other on this machine, on the same work:
#   - the same GPT-2 124M model file (llm.c's format, version 3; written here by a one-step run of ./train_gpt);
#   - the same tinyshakespeare batches in the same order: llm.c's shuffled loader, which is --shuffle 2 here;
#   - B 4, T 64 (train_gpt2.c's fixed shape), fp32, the same number of threads;
#   - AdamW at lr 1e-4, no weight decay, warmup or clipping, as train_gpt2.c runs it.
# It prints each trainer's median ms per step over the steps after the first, tokens/s and the speed-up. As a
# cross-check it also prints both trainers' losses at steps 0 and 1, which must agree to 1e-3. Only beta2 differs
# (llm.c's CPU trainer uses 0.999, ours 0.95), and Adam's first update does not depend on it: with one gradient,
# m_hat / sqrt(v_hat) is g / |g| for any beta.
#
#   bash scripts/bench_llmc_cpu.sh LLMC_DIR [STEPS [THREADS]]
#       LLMC_DIR  an llm.c checkout: its train_gpt2.c and llmc/ are compiled as llm.c's Makefile does
#                 (gcc -Ofast -march=native -fopenmp -DOMP)
#       STEPS     training steps of each trainer (default 10; the median is over steps 1..STEPS-1)
#       THREADS   OpenMP threads of llm.c, --threads here (default: the number of cores)
#
# llm.c's binary runs until it has printed STEPS steps and is then stopped. Along the way it evaluates 5 validation
# batches at step 0 (not timed: its "took" excludes them). Scratch goes to BENCH_DIR (default /tmp/bench_llmc_cpu).
# The matmul kernels used are printed: OpenBLAS's here (the family the trainer chose), llm.c's own loops there.
set -euo pipefail
cd "$(dirname "$0")/.."
LLMC=${1:?usage: bash scripts/bench_llmc_cpu.sh LLMC_DIR [STEPS [THREADS]]}
STEPS=${2:-10}
THREADS=${3:-$(nproc)}
W=${BENCH_DIR:-/tmp/bench_llmc_cpu}
[ -f "$LLMC/train_gpt2.c" ] && [ -d "$LLMC/llmc" ] || { echo "bench_llmc_cpu: $LLMC has no train_gpt2.c and llmc/ (an llm.c checkout)" >&2; exit 1; }
[ "$STEPS" -ge 3 ] 2>/dev/null || { echo "bench_llmc_cpu: STEPS must be a number >= 3, not '$STEPS'" >&2; exit 1; }
[ -x ./train_gpt ] || { echo "bench_llmc_cpu: ./train_gpt is missing: run make first" >&2; exit 1; }
bash scripts/prepare_tinyshakespeare.sh >/dev/null
TRAIN=data/tinyshakespeare/tiny_shakespeare_train_000000.bin
VAL=data/tinyshakespeare/tiny_shakespeare_val_000000.bin
rm -rf "$W" && mkdir -p "$W/dev/data/tinyshakespeare"

# llm.c's CPU trainer, built as its Makefile builds train_gpt2
gcc -Ofast -march=native -fopenmp -DOMP -Wno-unused-result -I"$LLMC" "$LLMC/train_gpt2.c" -o "$W/train_gpt2" -lm -lgomp
# the model file both read (a one-step run of d12 here: llm.c's CPU trainer only starts from a file), the data
# under llm.c's fixed names, and its tokenizer (for the samples it would print; the bench stops before them)
./train_gpt --model d12 --train "$TRAIN" --batch-size 4 --seq-len 64 --steps 1 --checkpoint-every 1 --out "$W/init" \
    --threads "$THREADS" > "$W/init.log" 2>&1 || { cat "$W/init.log" >&2; exit 1; }
ln -s "$W/init/model_00000001.bin" "$W/gpt2_124M.bin"
ln -s "$PWD/$TRAIN" "$W/dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
ln -s "$PWD/$VAL" "$W/dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
ln -s "$PWD/data/tinyshakespeare/gpt2_tokenizer.bin" "$W/gpt2_tokenizer.bin"

# llm.c: "step N: train loss L (took MS ms)" for N = 0, 1, ...; stopped once step STEPS-1 is printed
last=$((STEPS - 1))
# (exec: $! is train_gpt2 itself, which must be stopped before this trainer runs, or the two would share the cores)
( cd "$W" && OMP_NUM_THREADS=$THREADS exec stdbuf -oL ./train_gpt2 > llmc.log 2>&1 ) &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
until grep -q "^step $last: " "$W/llmc.log" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { echo "bench_llmc_cpu: llm.c's train_gpt2 stopped early:" >&2; tail -n 20 "$W/llmc.log" >&2; exit 1; }
    sleep 1
done
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
! kill -0 $pid 2>/dev/null || { echo "bench_llmc_cpu: llm.c's train_gpt2 (pid $pid) did not stop" >&2; exit 1; }
grep '^step [0-9]*: train loss' "$W/llmc.log" | head -n "$STEPS" | awk '{ print $2 + 0, $5, $7 }' > "$W/llmc.steps"

# this trainer: "step N/STEPS | loss L | ... | MS ms | ..." for N = 1 .. STEPS (its step N is llm.c's N-1)
env -u OPENBLAS_CORETYPE ./train_gpt --init "$W/gpt2_124M.bin" --train "$TRAIN" --batch-size 4 --seq-len 64 --steps "$STEPS" \
    --lr 1e-4 --lr-schedule constant --warmup 0 --weight-decay 0 --grad-clip 0 --shuffle 2 --threads "$THREADS" > "$W/ours.log" 2>&1 ||
    { tail -n 20 "$W/ours.log" >&2; exit 1; }
grep -E '^step +[0-9]+/[0-9]+ \| loss' "$W/ours.log" |
    awk -F'|' '{ split($1, s, /[ \/]+/); split($2, l, / +/); split($5, t, / +/); print s[2] - 1, l[3], t[2] }' > "$W/ours.steps"

median() { awk 'NR > 1 { print $3 }' "$1" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ml=$(median "$W/llmc.steps"); mo=$(median "$W/ours.steps")
[ "$(wc -l < "$W/llmc.steps")" -eq "$STEPS" ] && [ "$(wc -l < "$W/ours.steps")" -eq "$STEPS" ] ||
    { echo "bench_llmc_cpu: expected $STEPS steps of each (see $W/llmc.log, $W/ours.log)" >&2; exit 1; }
kernels=$(grep -m1 '^| matmuls' "$W/ours.log" | sed 's/^| matmuls *| //')
echo "# GPT-2 124M, B 4, T 64, fp32, $THREADS thread(s), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'); median of steps 1-$last"
printf "%-34s | %10s | %9s | %-13s | %s\n" trainer ms/step tokens/s "loss step 0" "loss step 1"
row() { printf "%-34s | %10.1f | %9.0f | %-13s | %s\n" "$1" "$2" "$(awk -v m="$2" 'BEGIN { print 256000 / m }')" "$(awk 'NR == 1 { print $2 }' "$3")" "$(awk 'NR == 2 { print $2 }' "$3")"; }
row "llm.c train_gpt2.c (own loops, OMP)" "$ml" "$W/llmc.steps"
row "train_gpt (this trainer)" "$mo" "$W/ours.steps"
echo "speed-up: $(awk -v a="$ml" -v b="$mo" 'BEGIN { printf "%.2fx", a / b }'); matmuls here: $kernels"
# the cross-check: the first two losses agree (same model, batches and first update)
paste "$W/llmc.steps" "$W/ours.steps" | head -n 2 | awk '{ d = $2 - $5; if (d < 0) d = -d; if (d > 1e-3) bad = 1; printf "step %d: llm.c %s, here %s (|difference| %.2g)\n", $1, $2, $5, d }
    END { if (bad) { print "bench_llmc_cpu: the losses differ by more than 1e-3: not the same computation"; exit 1 } }'
