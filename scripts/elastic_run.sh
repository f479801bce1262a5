#!/usr/bin/env bash
# scripts/elastic_run.sh: runs a data-parallel training job under mpirun and restarts it when it fails, from the
# latest checkpoint, on the ranks that remain; gives up after a number of failures with a summary of every attempt.
#
#   scripts/elastic_run.sh --np 4 [--min-np 2] [--max-restarts 3] -- <train_gpt flags>
#   scripts/elastic_run.sh --np 4 -- --model d12 --train 'data/x/*_train_*.bin' --batch-size 4 --seq-len 1024 \
#       --total-batch-size 524288 --steps 10000 --checkpoint-every 200 --out out/d12 --log out/d12.jsonl
#
# Options (before --):
#   --np N             ranks of the first attempt
#   --min-np M         never restart on fewer than M ranks (default 1)
#   --max-restarts K   restarts allowed; failure K+1 ends the run (default 3)
# The trainer's flags (after --) must hold --out DIR (the checkpoints; read from there, not given twice) and a
# fixed --total-batch-size (without it the global batch is B x T x ranks and would shrink with the ranks).
#
# Environment:
#   ELASTIC_MPIRUN          the launcher and its flags (default: mpirun --allow-run-as-root --oversubscribe
#                           --bind-to none, as scripts/run_tests.sh); -np N and the trainer are appended
#   TRAIN_GPT               the trainer (default: train_gpt in the repository root)
#   TRAIN_GPT_FAULT         fault injection of the tests (train_gpt.c: maybe_inject_fault), passed to the first
#                           attempt only, so a test kills a rank once ...
#   ELASTIC_FAULT_ATTEMPTS  ... or to the first N attempts (a number, or "all")
#
# The rule, attempt by attempt:
#   1. Attempt 1 runs the flags as given. A later attempt resumes from DIR (--resume DIR replaces any --resume
#      of the flags) once DIR/latest exists; before that it runs the flags as given again (from scratch, or from
#      the user's own --resume). A restart that resumes from step S first cuts the --log file back to step S, so
#      the steps the failed attempt ran past its checkpoint are not logged twice.
#   2. An attempt that exits 0 ends the run (exit 0). One that fails is a failure; after K+1 failures the run
#      gives up (exit 1).
#   3. Ranks lost in a failed attempt: those its output names as dead or hung (mpirun's "process rank N ...
#      exited on signal", the trainer's "rank(s) N,M never arrived", "the peer did not send: rank N" and "rank N on
#      HOST: no rank of that host answers" at the collective timeout). When it names none, one rank is assumed lost: the supervisor cannot tell which
#      resources are gone. A rank that exits with an error of its own is not lost.
#   4. The next attempt gets the largest rank count n <= (ranks of the failed attempt - ranks lost) that keeps the
#      global batch: n divides into --tp x --pp groups and --total-batch-size is a whole number of micro-steps of
#      B x T x (n / (tp x pp)) tokens (with --micro-batches M: exactly M of them). The global batch, hence each
#      step's samples and the data stream, is then the one of the uninterrupted run; counts that cannot keep it
#      are named with the reason. No such n >= --min-np: the run stops (exit 1).
#   5. An attempt that fails before its first step with an `error:` line and no lost rank was refused by the
#      trainer (flags, data, checkpoint): restarting would fail the same way, so the run stops (exit 1).
# Each attempt's output goes to the terminal and to DIR/elastic/attempt_K.txt; the summary (per attempt: ranks,
# the step it resumed from, exit status, last step, ranks lost, the error line) to the terminal and
# DIR/elastic/summary.txt. Usage errors exit 2 before anything runs; SIGINT or SIGTERM to the supervisor stops the
# attempt in flight and ends the run with the summary (exit 130 / 143). Tested by scripts/elastic_tests.sh.
set -u

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=log_lib.sh
source "$ROOT/scripts/log_lib.sh" # log_cut
TRAIN="${TRAIN_GPT:-$ROOT/train_gpt}"
read -r -a MPI <<< "${ELASTIC_MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}"
FAULT_ATTEMPTS="${ELASTIC_FAULT_ATTEMPTS:-1}"

say() { echo "elastic_run: $*"; }
usage_error() { echo "error: elastic_run: $*" >&2; exit 2; }
is_count() { [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -le 1000000000 ]; }

# ----------------------------------------------------------------------------
# options

NP=""
MIN_NP=1
MAX_RESTARTS=3
while [ $# -gt 0 ]; do
    case "$1" in
        --np|--min-np|--max-restarts)
            [ $# -ge 2 ] || usage_error "$1 needs a value"
            is_count "$2" || usage_error "$1: '$2' is not a whole number"
            case "$1" in --np) NP=$2 ;; --min-np) MIN_NP=$2 ;; --max-restarts) MAX_RESTARTS=$2 ;; esac
            shift 2 ;;
        -h|--help) sed -n '2,45p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        *) usage_error "unknown option '$1' (the trainer's flags go after --; see --help)" ;;
    esac
done
ARGS=("$@")
[ -n "$NP" ] || usage_error "--np N is required (the ranks of the first attempt)"
[ "$NP" -ge 1 ] || usage_error "--np must be at least 1"
{ [ "$MIN_NP" -ge 1 ] && [ "$MIN_NP" -le "$NP" ]; } || usage_error "--min-np $MIN_NP must be between 1 and --np $NP"
[[ "$FAULT_ATTEMPTS" == all ]] || is_count "$FAULT_ATTEMPTS" || usage_error "ELASTIC_FAULT_ATTEMPTS: '$FAULT_ATTEMPTS' is neither a number nor 'all'"
[ -x "$TRAIN" ] || usage_error "the trainer '$TRAIN' is not built (make train_gpt) or not executable"
command -v "${MPI[0]}" > /dev/null || usage_error "'${MPI[0]}' not found (ELASTIC_MPIRUN)"

# ----------------------------------------------------------------------------
# the trainer's flags the supervisor needs (every train_gpt flag takes one value; llm.c's short aliases too)

# flag_value NAME [ALIAS]: the value of --NAME in the trainer's flags, or nothing
flag_value() {
    local i
    for ((i = 0; i + 1 < ${#ARGS[@]}; i++)); do
        if [ "${ARGS[i]}" = "--$1" ] || { [ -n "${2:-}" ] && [ "${ARGS[i]}" = "$2" ]; }; then echo "${ARGS[i + 1]}"; return; fi
    done
}
# flag_int VAR NAME [ALIAS]: sets VAR to the flag's value or else the trainer's default (from its --help, "...
# (default 4)"), which must be a whole number
HELP=""
flag_int() {
    local v; v=$(flag_value "$2" "${3:-}")
    if [ -z "$v" ]; then
        [ -n "$HELP" ] || HELP=$("$TRAIN" --help 2>/dev/null)
        v=$(echo "$HELP" | awk -v f="--$2" '$1 == f && match($0, /\(default [^)]*\)$/) { print substr($0, RSTART + 9, RLENGTH - 10); exit }')
    fi
    is_count "$v" || usage_error "--$2: '$v' is not a whole number (or the trainer's --help gives no default)"
    printf -v "$1" '%s' "$v"
}
# without_resume: the trainer's flags less any --resume DIR, into RUN_ARGS
without_resume() {
    RUN_ARGS=()
    local i
    for ((i = 0; i < ${#ARGS[@]}; i++)); do
        if [ "${ARGS[i]}" = "--resume" ]; then i=$((i + 1)); continue; fi
        RUN_ARGS+=("${ARGS[i]}")
    done
}

OUT=$(flag_value out -o)
[ -n "$OUT" ] || usage_error "the trainer's flags must hold --out DIR: restarts resume from its checkpoints"
LOG=$(flag_value log)
USER_RESUME=$(flag_value resume)
flag_int B batch-size -b
flag_int T seq-len -t
flag_int TOTAL total-batch-size -d
flag_int TP tp
flag_int PP pp
flag_int MICRO micro-batches
[ "$TOTAL" -gt 0 ] || usage_error "the trainer's flags must fix --total-batch-size (tokens per optimizer step): by default it is B x T x ranks, so a restart on fewer ranks would train on smaller batches"
{ [ "$B" -gt 0 ] && [ "$T" -gt 0 ] && [ "$TP" -gt 0 ] && [ "$PP" -gt 0 ]; } || usage_error "--batch-size, --seq-len, --tp and --pp must be positive"

# A directory holding someone else's checkpoint would be resumed by the first restart: refuse it at the start.
same_dir() { [ -n "$2" ] && [ "$(realpath -m -- "$1")" = "$(realpath -m -- "$2")" ]; }
if [ -f "$OUT/latest" ] && ! same_dir "$OUT" "$USER_RESUME"; then
    usage_error "--out $OUT already holds a checkpoint (step $(cat "$OUT/latest")): add --resume $OUT to continue it, or choose an empty --out"
fi

# ----------------------------------------------------------------------------
# rank counts that keep the global batch

# batch_problem N: why N ranks cannot train the same global batch (nothing when they can)
batch_problem() {
    local n=$1 group=$((TP * PP))
    if [ $((n % group)) -ne 0 ]; then echo "$n ranks do not divide into groups of tp x pp = $group"; return; fi
    local dp=$((n / group)); local tok=$((B * T * dp))
    if [ "$MICRO" -gt 0 ]; then
        [ $((tok * MICRO)) -eq "$TOTAL" ] ||
            echo "--micro-batches $MICRO of $B x $T on $dp data-parallel rank(s) are $((tok * MICRO)) tokens, not --total-batch-size $TOTAL"
        return
    fi
    if [ $((TOTAL % tok)) -ne 0 ]; then
        echo "--total-batch-size $TOTAL is not a multiple of batch-size x seq-len x data-parallel ranks = $B x $T x $dp = $tok"
    elif [ $((TOTAL / tok)) -gt 1048576 ]; then
        echo "--total-batch-size $TOTAL needs $((TOTAL / tok)) micro-steps of $tok tokens, above the trainer's limit 2^20"
    fi
}

# pick_np MAX: prints the largest valid count in [MIN_NP, MAX] (saying why each larger one is not); fails if none
pick_np() {
    local n p
    for ((n = $1; n >= MIN_NP; n--)); do
        p=$(batch_problem "$n")
        [ -z "$p" ] && { echo "$n"; return 0; }
        say "cannot restart on $n ranks: $p" >&2
    done
    return 1
}

p=$(batch_problem "$NP")
[ -z "$p" ] || usage_error "--np $NP: $p"

# ----------------------------------------------------------------------------
# one attempt

# cut_log STEP: drops the --log lines of steps after STEP (the restart runs them again)
cut_log() {
    local msg
    if msg=$(log_cut "$LOG" "$1"); then
        [ -z "$msg" ] || say "$msg"
    else
        say "warning: could not cut $LOG back to step $1: its later steps will appear twice"
    fi
}

# lost_ranks FILE: the world ranks an attempt's output names as dead or hung, comma-separated, sorted
lost_ranks() {
    {
        sed -n 's/.*process rank \([0-9][0-9]*\) with PID .* exited on signal.*/\1/p' "$1"
        sed -n 's/.*rank(s) \([0-9][0-9,]*\) never arrived.*/\1/p' "$1" | tr ',' '\n'
        sed -n 's/.*the peer did not \(send\|receive\): rank \([0-9][0-9]*\) .*/\2/p' "$1"
        grep -o 'rank [0-9][0-9]* on [^:;]*: no rank of that host answers' "$1" | sed 's/^rank \([0-9]*\) .*/\1/'
    } | sort -n -u | paste -s -d, -
}

# error_line FILE: the line that says why an attempt failed (the trainer's first error:, else mpirun's report of
# a dead rank, else the last line), cut to 200 characters
error_line() {
    local e
    e=$(grep -m1 '^error:' "$1")
    [ -n "$e" ] || e=$(grep -m1 -E 'process rank [0-9]+ with PID .* exited on signal|exited with non-zero status|MPI_ABORT was invoked' "$1")
    [ -n "$e" ] || e=$(grep -v '^[[:space:]-]*$' "$1" | tail -n 1)
    echo "${e:0:200}"
}

# last_step FILE: the last step an attempt's output reports as trained ("step   12/20 | loss ..."), or -
last_step() {
    local s; s=$(sed -n 's/^step  *\([0-9][0-9]*\)\/[0-9][0-9]* | loss.*/\1/p' "$1" | tail -n 1)
    echo "${s:--}"
}

JOB=""
TAILPID=""
stop_job() {
    [ -n "$JOB" ] && kill -TERM "$JOB" 2>/dev/null && wait "$JOB" 2>/dev/null
    [ -n "$TAILPID" ] && kill "$TAILPID" 2>/dev/null
    JOB=""; TAILPID=""
}

# run_attempt K NP FILE FROM ARGS...: runs the trainer on NP ranks, its output shown and kept in FILE; sets RC
run_attempt() {
    local k=$1 np=$2 file=$3 from=$4; shift 4
    local env_cmd=(env -u TRAIN_GPT_FAULT) fwd=()
    if [ -n "${TRAIN_GPT_FAULT:-}" ] && { [ "$FAULT_ATTEMPTS" = all ] || [ "$k" -le "$FAULT_ATTEMPTS" ]; }; then
        env_cmd=(env "TRAIN_GPT_FAULT=$TRAIN_GPT_FAULT"); fwd=(-x TRAIN_GPT_FAULT)
        say "attempt $k: with TRAIN_GPT_FAULT=$TRAIN_GPT_FAULT"
    fi
    say "attempt $k on $np rank(s), from $from: ${MPI[*]} -np $np $TRAIN $*"
    : > "$file"
    "${env_cmd[@]}" "${MPI[@]}" "${fwd[@]}" -np "$np" "$TRAIN" "$@" > "$file" 2>&1 < /dev/null &
    JOB=$!
    tail -s 0.2 -n +1 -f --pid="$JOB" "$file" &
    TAILPID=$!
    wait "$JOB"; RC=$?
    wait "$TAILPID" 2>/dev/null
    JOB=""; TAILPID=""
}

# ----------------------------------------------------------------------------
# the summary

A_NP=(); A_FROM=(); A_RC=(); A_LAST=(); A_LOST=(); A_ERR=()
summary() {
    local verdict="$1" i
    {
        echo "elastic_run: summary of $OUT (--np $NP, --min-np $MIN_NP, --max-restarts $MAX_RESTARTS)"
        printf '  %-7s | %-5s | %-12s | %-4s | %-9s | %-10s | %s\n' attempt ranks "resumed from" exit "last step" "ranks lost" "error"
        for ((i = 0; i < ${#A_NP[@]}; i++)); do
            printf '  %-7s | %-5s | %-12s | %-4s | %-9s | %-10s | %s\n' $((i + 1)) "${A_NP[i]}" "${A_FROM[i]}" "${A_RC[i]}" \
                "${A_LAST[i]}" "${A_LOST[i]:--}" "${A_ERR[i]:--}"
        done
        echo "elastic_run: $verdict"
    } | tee "$OUT/elastic/summary.txt"
}

# interrupted STATUS: a signal to the supervisor ends the attempt in flight (its row says so) and the run
interrupted() {
    stop_job
    if [ "${attempt:-0}" -gt "${#A_NP[@]}" ]; then
        A_NP+=("$np"); A_FROM+=("$from"); A_RC+=("-"); A_LAST+=("$(last_step "$file")"); A_LOST+=(""); A_ERR+=("stopped by the signal")
    fi
    summary "interrupted by a signal during attempt $attempt"
    exit "$1"
}
trap 'interrupted 130' INT
trap 'interrupted 143' TERM

# ----------------------------------------------------------------------------
# the attempts

mkdir -p "$OUT/elastic" || usage_error "cannot create $OUT/elastic"
[ -n "$(flag_value checkpoint-every -n)" ] || say "note: no --checkpoint-every: a restart can only resume from a checkpoint already in $OUT (else from scratch)"
np=$NP
failures=0
attempt=0
while :; do
    attempt=$((attempt + 1))
    from="scratch"
    RUN_ARGS=("${ARGS[@]}")
    if [ "$attempt" -gt 1 ] && [ -f "$OUT/latest" ]; then
        without_resume
        RUN_ARGS+=(--resume "$OUT")
        from="step $(cat "$OUT/latest")"
    elif [ -n "$USER_RESUME" ] && [ -f "$USER_RESUME/latest" ]; then
        from="step $(cat "$USER_RESUME/latest")"
    fi
    [ "$attempt" -eq 1 ] || [ "$from" = scratch ] || cut_log "${from#step }"
    file="$OUT/elastic/attempt_$attempt.txt"
    run_attempt "$attempt" "$np" "$file" "$from" "${RUN_ARGS[@]}"
    A_NP+=("$np"); A_FROM+=("$from"); A_RC+=("$RC"); A_LAST+=("$(last_step "$file")")
    if [ "$RC" -eq 0 ]; then
        A_LOST+=(""); A_ERR+=("")
        restarts=$((attempt - 1))
        ranks="${A_NP[*]}"; ranks=${ranks// / -> }
        summary "finished after $restarts restart(s) (ranks: $ranks)"
        exit 0
    fi
    failures=$((failures + 1))
    lost=$(lost_ranks "$file")
    err=$(error_line "$file")
    A_LOST+=("$lost"); A_ERR+=("$err")
    if [ -z "$lost" ] && [ "$(last_step "$file")" = - ] && grep -q '^error:' "$file"; then
        summary "gave up: attempt $attempt was refused by the trainer before its first step (a restart would fail the same way): $err"
        exit 1
    fi
    if [ "$failures" -gt "$MAX_RESTARTS" ]; then
        summary "gave up after $failures failure(s) (--max-restarts $MAX_RESTARTS)"
        exit 1
    fi
    if [ -n "$lost" ]; then
        nlost=$(echo "$lost" | tr ',' '\n' | wc -l)
        say "attempt $attempt failed (exit $RC): rank(s) $lost lost, $((np - nlost)) of $np remain"
    else
        nlost=1
        say "attempt $attempt failed (exit $RC) naming no lost rank: one assumed lost, $((np - 1)) of $np remain"
    fi
    remain=$((np - nlost))
    if [ "$remain" -lt "$MIN_NP" ]; then
        summary "gave up: $remain rank(s) remain, fewer than --min-np $MIN_NP"
        exit 1
    fi
    if ! next=$(pick_np "$remain"); then
        summary "gave up: no rank count between --min-np $MIN_NP and the $remain remaining keeps the global batch of $TOTAL tokens"
        exit 1
    fi
    np=$next
    say "restart $failures of at most $MAX_RESTARTS: on $np rank(s)"
done
