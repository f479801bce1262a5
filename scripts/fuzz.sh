#!/usr/bin/env bash
# scripts/fuzz.sh: runs the libFuzzer harnesses (fuzz/bin/<target>, built by `make fuzz-build`), FUZZ_JOBS at a time
# (default: one per CPU core), each for FUZZ_SECONDS (default 60), and fails if any of them finds something (a crash,
# a sanitizer report, a leak, a timeout, a broken invariant). Used by `make fuzz` and .ci/run.
#
#   scripts/fuzz.sh [target ...]        (default: every fuzz/<target>.c; run from anywhere)
#   FUZZ_SECONDS=600 scripts/fuzz.sh vocab
#   FUZZ_VOCAB_DIR=../shared/data/gpt2 scripts/fuzz.sh encode     (round trip on the full GPT-2 vocabulary)
#   FUZZ_ARGS='-jobs=2 -workers=2' scripts/fuzz.sh shard           (extra libFuzzer flags)
#
# Each target reads the committed seeds fuzz/corpus/<target>/ (never written) and grows its own corpus in
# fuzz/work/<target>/ (kept between runs, git-ignored), so longer or repeated runs go deeper. A finding is saved as
# fuzz/artifacts/<target>/crash-<sha1> (or leak-, timeout-, oom-); the script prints that path and the command
# that replays it with its messages. The full log of each run is fuzz/work/<target>.log.
set -uo pipefail
cd "$(dirname "$0")/.."

SECONDS_EACH=${FUZZ_SECONDS:-60}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then # every harness: fuzz/<target>.c
    for f in fuzz/*.c; do targets+=("$(basename "$f" .c)"); done
fi

# per-target input size limit (bytes): large enough for the seeds and for a few shards / a small vocabulary
max_len() {
    case "$1" in
        vocab) echo 16384 ;;
        shard | checkpoint | model | tokenizer_bin | hellaswag | parquet) echo 8192 ;;
        *) echo 4096 ;;
    esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# fuzz_one TARGET: one harness for SECONDS_EACH; its summary line goes to fuzz/work/TARGET.summary ("ok   ..." or
# "FAIL ..."), and what a failure prints to stderr, after the others have finished (harnesses run side by side)
fuzz_one() {
    local t=$1 bin=fuzz/bin/$1 log=fuzz/work/$1.log out=fuzz/work/$1.summary
    rm -f "$out" "fuzz/work/$t.report"
    if [ ! -x "$bin" ]; then echo "FAIL $t: $bin is not built (make fuzz-build)" > "$out"; return; fi
    mkdir -p "fuzz/work/$t" "fuzz/artifacts/$t"
    local dict=()
    [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
    local before after rc
    before=$(ls "fuzz/artifacts/$t" | wc -l)
    export FUZZ_FAIL_LOG=fuzz/work/$t.fail # a broken invariant's message (stderr is closed)
    rm -f "$FUZZ_FAIL_LOG"
    echo "fuzz: $t for ${SECONDS_EACH}s ..."
    # -close_fd_mask=3: the parsers' own error messages go nowhere (libFuzzer and sanitizer reports still print)
    # -timeout: an input that takes this long is a finding (a hang); -rss_limit_mb / -malloc_limit_mb: so is
    # a single allocation or a footprint this large, from an input of a few KB
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len="$(max_len "$t")" -close_fd_mask=3 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" "${dict[@]}" ${FUZZ_ARGS:-} \
        "fuzz/work/$t" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    after=$(ls "fuzz/artifacts/$t" | wc -l)
    local runs eps cov line
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | awk '{print $2}')
    eps=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | awk '{print $2}')
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$log" | tail -1)
    line="$t: ${runs:-?} runs, ${eps:-?} exec/s, ${cov:-no coverage line}"
    if [ $rc -ne 0 ] || [ "$after" -gt "$before" ]; then
        {
            echo "fuzz: FAIL $t (exit $rc); the end of $log:"
            [ -f "$FUZZ_FAIL_LOG" ] && cat "$FUZZ_FAIL_LOG"
            grep -E 'ERROR|SUMMARY|INVARIANT|^ +#[0-7] ' "$log" | head -12
            for a in $(ls -t "fuzz/artifacts/$t" | head -3); do
                echo "fuzz: reproducer: fuzz/artifacts/$t/$a   (replay: $bin fuzz/artifacts/$t/$a)"
            done
        } > "fuzz/work/$t.report"
        echo "FAIL $line" > "$out"
    else
        echo "ok   $line" > "$out"
    fi
}

# FUZZ_JOBS harnesses at a time (default: one per CPU core; each is one process of one thread)
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
mkdir -p fuzz/work
running=0
for t in "${targets[@]}"; do
    if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
    fuzz_one "$t" &
    running=$((running + 1))
done
wait

failed=()
summary=()
for t in "${targets[@]}"; do
    line=$(cat "fuzz/work/$t.summary" 2>/dev/null || echo "FAIL $t: no result")
    summary+=("$line")
    if [[ "$line" != ok* ]]; then
        failed+=("$t")
        [ -f "fuzz/work/$t.report" ] && cat "fuzz/work/$t.report" >&2
    fi
done

echo "fuzz: summary (${SECONDS_EACH}s each)"
for s in "${summary[@]}"; do echo "  $s"; done
if [ ${#failed[@]} -ne 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: no findings"
