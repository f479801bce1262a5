#!/usr/bin/env bash
# scripts/coverage.sh: which lines of the C sources no test runs (gcov), to find where tests, and planted bugs
# (scripts/mutate.sh), are missing: a bug in a line no test runs cannot be caught.
#
# Copies the working tree to a scratch directory, builds the CPU binaries there at -O0 with --coverage, runs the test
# commands in it, and merges the counts of every binary: a line counts as run when any binary ran it (the headers are
# compiled into several). Prints, per source file, its executable lines and those never run, fewest first, and writes
# the never-run lines ("FILE:LINE: code") to coverage_uncovered.txt in the working tree (or to $COVERAGE_OUT).
#
#   bash scripts/coverage.sh                                        the CPU suites below (about 25 minutes on 2 cores)
#   COVERAGE_TEST_CMD='./tests/test_pp && ./tests/test_dataloader' bash scripts/coverage.sh     other commands
#
# Environment: COVERAGE_TEST_CMD (run in the copy's root, default below), COVERAGE_TARGETS (the make targets built),
# COVERAGE_OUT, COVERAGE_KEEP=1 (keep the scratch directory; its path is printed), MUTATE_JOBS-like COVERAGE_JOBS (2).
# What it cannot see: a process ended by a signal (mpirun killing the other ranks of a job that failed, a SIGKILL)
# writes no counts, so what it ran after its last exit shows as never run; the rank that calls MPI_Abort writes its
# counts first (comm.h, in these builds). The CUDA sources are not built.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
OUT=${COVERAGE_OUT:-$ROOT/coverage_uncovered.txt}
JOBS=${COVERAGE_JOBS:-2}
TARGETS=${COVERAGE_TARGETS:-"train_gpt test_gpt tokenize parquet_text tests/test_runs tests/test_tp_runs tests/test_pp_runs \
tests/test_hellaswag tests/test_tokenizer tests/test_hf tests/test_dataloader tests/test_comm tests/test_pp tests/test_tp \
tests/test_precision tests/test_powersgd"}
MPI="mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"
DEFAULT_CMD="./test_gpt; ./tests/test_runs; ./tests/test_tp_runs; ./tests/test_pp_runs; ./tests/test_hellaswag; \
./tests/test_tokenizer; ./tests/test_hf; ./tests/test_dataloader; ./tests/test_pp; ./tests/test_precision; \
bash scripts/data_tests.sh; bash scripts/fault_tests.sh; bash scripts/elastic_tests.sh; bash scripts/multihost_tests.sh; \
for np in 1 2 3 4; do $MPI -np \$np ./tests/test_comm; done; for np in 1 2 4; do $MPI -np \$np ./tests/test_tp; \
$MPI -np \$np ./tests/test_powersgd; done; true"
CMD=${COVERAGE_TEST_CMD:-$DEFAULT_CMD}
command -v gcov > /dev/null || { echo "coverage: gcov not found (it comes with gcc)" >&2; exit 2; }

SCR=$(mktemp -d "${TMPDIR:-/var/tmp}/coverage.XXXXXX")
[ "${COVERAGE_KEEP:-0}" = 1 ] && echo "coverage: scratch directory $SCR (kept)" || trap 'rm -rf "$SCR"' EXIT
mkdir -p "$SCR/tree" "$SCR/gcov"
# the working tree: tracked files as they are on disk and untracked files that are not ignored (as scripts/mutate.sh)
(cd "$ROOT" && git ls-files -z -co --exclude-standard) |
    (cd "$ROOT" && while IFS= read -r -d '' f; do [ -f "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done) |
    (cd "$ROOT" && tar --null -T - -cf -) | tar -xf - -C "$SCR/tree" || { echo "coverage: copying the working tree failed" >&2; exit 2; }
[ -d "$ROOT/../shared" ] && ln -s "$(cd "$ROOT/../shared" && pwd -P)" "$SCR/shared"
cd "$SCR/tree" || exit 2
echo "coverage: building $TARGETS"
# shellcheck disable=SC2086 # (TARGETS is a list)
# (COVERAGE_BUILD: comm.h writes the counts before MPI_Abort ends a process)
if ! make -j"$JOBS" OPT="-O0 --coverage -DCOVERAGE_BUILD" TEST_OPT="-O0 --coverage -DCOVERAGE_BUILD" LDLIBS="-lm --coverage" $TARGETS \
        > "$SCR/build.log" 2>&1; then
    tail -n 20 "$SCR/build.log" >&2
    echo "coverage: the build failed" >&2
    exit 2
fi
echo "coverage: running the tests"
bash -c "$CMD" > "$SCR/tests.log" 2>&1
grep -E '^[0-9]+ passed, [0-9]+ failed' "$SCR/tests.log" | awk '{p += $1; f += $3} END {printf "coverage: the tests: %d passed, %d failed\n", p, f}'

# one gcov run per binary, its outputs moved to a directory of their own (gcov names them after the sources, which
# several binaries share)
k=0
while IFS= read -r gcda; do
    k=$((k + 1))
    dir=$(dirname "$gcda")
    src="$dir/$(basename "$gcda" .gcda).c"
    [ -f "$src" ] || continue
    mkdir -p "$SCR/gcov/$k"
    gcov -o "$dir" "$src" > /dev/null 2>&1 # (from the tree's root, where the sources' recorded paths hold)
    mv ./*.gcov "$SCR/gcov/$k/" 2> /dev/null
done < <(find . -name '*.gcda' | sort)

# merge: per source file (the "Source:" line of each .gcov) and line, the largest count over the binaries; a line
# is executable when any binary says so
find "$SCR/gcov" -name '*.gcov' -print0 | xargs -0 awk -v tree="$SCR/tree/" '
    FNR == 1 { src = "" }
    {
        split($0, f, ":")
        cnt = f[1]; gsub(/ /, "", cnt); ln = f[2] + 0
        if (ln == 0) {
            if (f[3] == "Source") { src = substr($0, index($0, "Source:") + 7); sub(tree, "", src); sub(/^\.\//, "", src) }
            next
        }
        if (src == "" || src ~ /^\//) { next }
        key = src SUBSEP ln
        text[key] = substr($0, length(f[1]) + length(f[2]) + 3)
        if (cnt == "-") { next }
        n = (cnt ~ /^[#=]/) ? 0 : cnt + 0
        exe[key] = 1
        if (!(key in best) || n > best[key]) { best[key] = n }
    }
    END {
        for (key in exe) {
            split(key, kk, SUBSEP)
            lines[kk[1]]++
            if (best[key] == 0) { never[kk[1]]++; printf "%s:%d: %s\n", kk[1], kk[2], text[key] > "/dev/stderr" }
        }
        for (s in lines) { printf "%5d %5d %s\n", never[s] + 0, lines[s], s }
    }' 2> "$SCR/never.txt" | sort -k1,1nr -k3 > "$SCR/summary.txt"
sort -t: -k1,1 -k2,2n "$SCR/never.txt" > "$OUT"
echo "coverage: lines never run / executable lines, per file (the lines themselves: $OUT)"
awk '{ printf "  %-28s %5d of %5d never run (%.1f%% run)\n", $3, $1, $2, 100.0 * ($2 - $1) / ($2 ? $2 : 1) }' "$SCR/summary.txt"
