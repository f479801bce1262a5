#!/usr/bin/env bash
# scripts/run_scripts_tests.sh: every reproduction script (scripts/run_gpt2_*.sh, scripts/run_gpt3_*.sh) through its
# dry run (DRY_RUN=1, scripts/run_lib.sh): it builds, prepares the committed stand-ins of its data through the real
# prepare scripts, trains 2 steps of its configuration scaled down on the CPU and prints the planner's layouts for
# the real size. Checked for each: the run passes and writes its final checkpoint; its log holds 2 finite training
# losses, the validation loss and the HellaSwag accuracies; the plan names the script's own layout as fitting; the
# real command line keeps the script's hyperparameters (printed table of changes holds only sizes and intervals).
# Also: re-running a finished dry run does nothing; a run cut back to its step-1 checkpoint resumes and ends with
# the same model, byte for byte, as the uninterrupted run; tensor- and pipeline-parallel layouts from the
# environment (TP=2, PP=2) run; a layout that does not fit the GPU memory, and nonsense machine variables, are
# refused with the reason. And a real run's mechanics, with a stand-in trainer: failed attempts retried from the newest
# checkpoint (MAX_RESTARTS, RESTART_DELAY), the log cut back, several ranks through mpirun, a finished run left alone.
# And scripts/plot_log.sh: its points, a plot, its refusals.
#
#   bash scripts/run_scripts_tests.sh [NAME_REGEX]          (last line: N passed, M failed)
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0 failed=0
source scripts/test_lib.sh
ONLY="${1:-.}"
# a scratch directory of this run's own (kept when a check failed, to look at the dry runs' logs)
T=$(mktemp -d "${TMPDIR:-/tmp}/test_run_scripts.XXXXXX") || { echo "FAIL setup: cannot create a scratch directory"; echo "0 passed, 1 failed"; exit 1; }
trap '[ "$failed" = 0 ] && rm -rf "$T"' EXIT

# dry NAME OUTFILE [ENV=VALUE...]: the dry run of scripts/NAME.sh into $T/dry (shared data), its output in OUTFILE
dry() {
    local name="$1" out="$2"
    shift 2
    env DRY_RUN=1 DRY_RUN_DIR="$T/dry" "$@" bash "scripts/$name.sh" > "$out" 2>&1
}

# refused NAME WANT_RC RC OUT TEXT: a check that a command exited with status WANT_RC (it gave RC) and printed TEXT (its
# output in file OUT)
refused() {
    local problems=""
    [ "$3" = "$2" ] || problems="exit $3 (want $2)"
    grep -qF -- "$5" "$4" || problems="$problems; no '$5' in: $(tail -n 1 "$4")"
    check "$1" "$problems"
}

# the changes a dry run may make to the real command line: sizes, intervals, threads (never a hyperparameter)
ALLOWED_CHANGES='^(--model|--seq-len|--batch-size|--total-batch-size|--batch-ramp-start|--batch-ramp-tokens|--steps|--val-every|--val-steps|--hellaswag-every|--sample-every|--gen-tokens|--checkpoint-every|--threads)$'

for script in scripts/run_gpt2_*.sh scripts/run_gpt3_*.sh; do
    name="$(basename "$script" .sh)"
    [[ "$name" =~ $ONLY ]] || continue
    run="${name#run_}"
    out="$T/$name.out"
    dry "$name" "$out"
    rc=$?
    log="$T/dry/$run/out/log.jsonl"
    # 2 steps of the whole batch; the GPT-3 scripts' batch ramp, scaled to one sequence per rank growing to the whole
    # batch F = 4 of them over F tokens, takes 4 steps for those 2 F tokens (1, 1, 2, then 4 sequences per rank)
    want="1 2" final=2
    grep -q -- '--batch-ramp-start' "$script" && want="1 2 3 4" final=4
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 3 "$out" | tr '\n' ' ')"
    grep -q "^dry run: $run passed$" "$out" || problems="$problems; no 'dry run: $run passed' line"
    [ -f "$T/dry/$run/out/model_0000000$final.bin" ] || problems="$problems; no final checkpoint"
    check "$name: the dry run passes and writes its final checkpoint (step $final)" "$problems"
    [ "$rc" = 0 ] || continue
    # the log: the steps' finite losses, the validation loss, both HellaSwag accuracies
    problems=""
    [ "$(steps_of "$log")" = "$want" ] || problems="training steps '$(steps_of "$log")' (want '$want')"
    log_values "$log" | awk '$2 !~ /^[0-9.]+$/ { bad = 1 } END { exit bad }' || problems="$problems; a loss is not a finite number"
    grep -q '"val_loss"' "$log" || problems="$problems; no val_loss"
    grep -q '"hellaswag_acc_norm"' "$log" || problems="$problems; no hellaswag_acc_norm"
    check "$name: the log holds its training steps ($want), the validation loss and HellaSwag" "$problems"
    # the changes are sizes and intervals only
    bad="$(awk '/^  --/ { print $1 }' "$out" | grep -Ev "$ALLOWED_CHANGES" | tr '\n' ' ')"
    check "$name: the dry run changes only sizes and intervals of the real command line" "${bad:+changed: $bad}"
    # scaled to at most 2 data-parallel ranks and 2 micro-steps, 2 x 64 tokens each, and one thread per process
    problems=""
    k="$(grep -oE ', [0-9]+ micro-step\(s\) per step$' "$out" | grep -oE '[0-9]+')"
    dp="$(grep -oE 'process\(es\) \(dp [0-9]+' "$out" | grep -oE '[0-9]+$')"
    { [[ "$k" =~ ^[12]$ ]] && [[ "$dp" =~ ^[12]$ ]]; } || problems="micro-steps '$k', dp '$dp' (want 1 or 2 each)"
    grep -qE -- "^  --total-batch-size +[0-9]+ +-> $((128 * ${dp:-0} * ${k:-0}))$" "$out" || problems="$problems; --total-batch-size is not 2 x 64 x dp x micro-steps"
    grep -qE -- "^  --threads +\(not set\) +-> 1$" "$out" && grep -q "^dry run: ./train_gpt .* --threads 1" "$out" || problems="$problems; --threads 1 not added to the command line"
    check "$name: the dry run takes at most 2 data-parallel ranks and 2 micro-steps of 2 x 64 tokens, one thread each" "$problems"
    # the plan: printed for the real size, with the script's own layout among the fitting ones
    model="$(grep -oE -- '--model [^ ]+' "$script" | head -1 | cut -d' ' -f2)"
    problems=""
    grep -q "^plan: $model (" "$out" || problems="no plan for $model"
    grep -A1 "^dry run: this script's layout in the plan" "$out" | grep -qE '^ *[0-9]+ \|' || problems="$problems; the script's layout is not in the plan"
    check "$name: the plan for the real size ($model) holds the script's layout" "$problems"
done

if [[ "run_gpt2_124M" =~ $ONLY ]]; then
    # re-running a finished run does nothing
    dry run_gpt2_124M "$T/again.out"
    rc=$?
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc"
    grep -q "^dry run: gpt2_124M is complete" "$T/again.out" || problems="$problems; no 'is complete' line"
    [ "$(steps_of "$T/dry/gpt2_124M/out/log.jsonl")" = "1 2" ] || problems="$problems; the log has steps '$(steps_of "$T/dry/gpt2_124M/out/log.jsonl")'"
    check "run_gpt2_124M: re-running the finished dry run trains nothing" "$problems"
    # cut back to the step-1 checkpoint, as a run killed before step 2's checkpoint was committed leaves it (the pair
    # gone and `latest` still naming step 1): re-running resumes from it and ends with the same model, byte for byte
    d="$T/dry/gpt2_124M/out"
    cp "$d/model_00000002.bin" "$T/model_uninterrupted.bin"
    rm -f "$d/model_00000002.bin" "$d/state_00000002.bin"
    echo 1 > "$d/latest"
    dry run_gpt2_124M "$T/resume.out"
    rc=$?
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 3 "$T/resume.out" | tr '\n' ' ')"
    grep -q -- "--resume $d" "$T/resume.out" || problems="$problems; not resumed with --resume $d"
    { grep -qE "^step +2/2 " "$T/resume.out" && ! grep -qE "^step +1/2 " "$T/resume.out"; } || problems="$problems; the trainer did not continue at step 2"
    cmp -s "$d/model_00000002.bin" "$T/model_uninterrupted.bin" || problems="$problems; the final model differs from the uninterrupted run's"
    grep -q "^cut $d/log.jsonl back to step 1 " "$T/resume.out" || problems="$problems; the log was not cut back to step 1"
    [ "$(steps_of "$d/log.jsonl")" = "1 2" ] || problems="$problems; the log has steps '$(steps_of "$d/log.jsonl")' (want each once: 1 2)"
    check "run_gpt2_124M: re-running after losing the last checkpoint resumes from step 1, logs step 2 once, and ends bit for bit as the uninterrupted run" "$problems"
fi

if [[ "ramp" =~ $ONLY ]]; then
    # run_lib.sh's count of a ramped run's steps (the final checkpoint a finished run has): GPT-3 125M's 591,580, the
    # trainer's count (test_gpt --only units pins ramp_walk to it); and the ramp's start raised to a whole micro-batch
    # under a pipeline (2.7B with PP=2: 8 x 2048 x 4 ranks = 65,536 tokens)
    got="$(bash -c 'source scripts/run_lib.sh; ARGS=(--steps 572204 --total-batch-size 524288 --batch-ramp-start 32768 --batch-ramp-tokens 4000000000); run_steps')"
    check "ramp: run_lib's run_steps counts GPT-3 125M's 591,580 steps (572,204 whole batches' worth)" "$([ "$got" = 591580 ] || echo "got '$got'")"
    got="$(bash -c 'source scripts/run_lib.sh; RUN_NAME=x PP=2 RUN_DP=4; ARGS=(--batch-size 8 --seq-len 2048 --total-batch-size 1048576 --batch-ramp-start 32768); ramp_fit; echo "start $(args_get --batch-ramp-start)"')"
    problems=""
    [[ "$got" == *"start 65536" ]] || problems="got '$got'"
    [[ "$got" == *"--batch-ramp-start 32768 -> 65536: with PP 2 a step is whole micro-batches of 8 x 2048 tokens on each of 4 data-parallel ranks"* ]] || problems="$problems; no note"
    check "ramp: under PP=2 run_lib raises GPT-3 2.7B's ramp start to one whole micro-batch (65,536 tokens), with a note" "$problems"
    got="$(bash -c 'source scripts/run_lib.sh; RUN_NAME=x PP=1 RUN_DP=8; ARGS=(--batch-size 8 --seq-len 2048 --total-batch-size 1048576 --batch-ramp-start 32768); ramp_fit; echo "start $(args_get --batch-ramp-start)"')"
    check "ramp: without a pipeline the script's ramp start stands" "$([ "$got" = "start 32768" ] || echo "got '$got'")"
    # raised past the first whole micro-batch when that does not divide the batch: 1 x 1024 tokens on 1 rank, start
    # 2500 -> 3072 (3 micro-batches; 8192 % 3072 != 0) -> 4096
    got="$(bash -c 'source scripts/run_lib.sh; RUN_NAME=x PP=2 RUN_DP=1; ARGS=(--batch-size 1 --seq-len 1024 --total-batch-size 8192 --batch-ramp-start 2500); ramp_fit > /dev/null; echo "start $(args_get --batch-ramp-start)"')"
    check "ramp: under PP=2 the raised ramp start divides the whole batch (2500 -> 4096, not 3072, of 8192)" "$([ "$got" = "start 4096" ] || echo "got '$got'")"
    # the final checkpoint a complete ramped run has: at run_steps' count, not --steps
    got="$(bash -c 'source scripts/run_lib.sh; OUT=o; ARGS=(--steps 572204 --total-batch-size 524288 --batch-ramp-start 32768 --batch-ramp-tokens 4000000000); final_model')"
    check "ramp: a ramped run is complete at its step 591,580's checkpoint" "$([ "$got" = o/model_00591580.bin ] || echo "got '$got'")"
fi

if [[ "layouts" =~ $ONLY ]]; then
    # tensor and pipeline parallel from the environment, kept in the dry run (dp 2 x tp 2, dp 2 x pp 2)
    dry run_gpt3_125M "$T/tp.out" TP=2 DRY_RUN_DIR="$T/dry_tp"
    rc=$?
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 3 "$T/tp.out" | tr '\n' ' ')"
    grep -q "4 process(es) (dp 2 x tp 2 x pp 1; the real run: dp 4)" "$T/tp.out" || problems="$problems; not dp 2 x tp 2"
    grep -q "processes  *| 4 (dp 2, tp 2, pp 1)" "$T/tp.out" || problems="$problems; the trainer did not run dp 2 x tp 2"
    grep -A1 "^dry run: this script's layout" "$T/tp.out" | grep -qE '^ *[0-9]+ \| +4 +2 +1 \|' || problems="$problems; the plan lacks dp 4 tp 2"
    check "layouts: TP=2 run_gpt3_125M runs dp 2 x tp 2 and plans dp 4 x tp 2" "$problems"
    dry run_gpt2_350M "$T/pp.out" PP=2 DRY_RUN_DIR="$T/dry_pp"
    rc=$?
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 3 "$T/pp.out" | tr '\n' ' ')"
    grep -q "processes  *| 4 (dp 2, tp 1, pp 2)" "$T/pp.out" || problems="$problems; the trainer did not run dp 2 x pp 2"
    check "layouts: PP=2 run_gpt2_350M runs dp 2 x pp 2" "$problems"
    # refusals: a layout that cannot fit, nonsense machine variables
    dry run_gpt2_1558M "$T/small.out" GPU_MEMORY_GB=16 DRY_RUN_DIR="$T/dry_small"
    rc=$?
    problems=""
    [ "$rc" = 1 ] || problems="exit $rc (want 1)"
    grep -q "error: dry run: the planner finds no fitting layout dp 8 tp 1 pp 1 zero 1 B 16 recompute 0 bf16 (schedule -)" "$T/small.out" || problems="$problems; no message: $(tail -n 2 "$T/small.out" | tr '\n' ' ')"
    check "layouts: gpt2_1558M on 16 GB GPUs is refused: its layout does not fit" "$problems"
    for bad in "GPUS_PER_NODE=3 TP=2|do not split into TP 2 x PP 1" "NODES=0|NODES='0' is not a positive integer" "DRY_RUN=yes|DRY_RUN='yes' (0 or 1)"; do
        env_set="${bad%%|*}" want="${bad#*|}"
        env DRY_RUN=1 DRY_RUN_DIR="$T/dry_bad" $env_set bash scripts/run_gpt2_124M.sh > "$T/bad.out" 2>&1
        refused "layouts: $env_set is refused" 2 $? "$T/bad.out" "$want"
    done
fi

if [[ "real" =~ $ONLY ]]; then
    # a real run's mechanics (run_lib.sh's run_training without DRY_RUN), with a stand-in trainer: attempt k fails
    # while k <= FAKE_FAILS, after checkpointing step k and logging a step past it; an attempt after that writes the
    # final checkpoint. Each call's command line, rank, launcher and FAKE_MARK go to $FAKE_CALLS, and so does each
    # wait between attempts (a stand-in for sleep: "sleep N").
    cat > "$T/fake" << 'FAKE'
#!/usr/bin/env bash
args="$*" out="" steps="" log=""
while [ $# -gt 0 ]; do
    case "$1" in --out) out="$2" ;; --steps) steps="$2" ;; --log) log="$2" ;; esac
    shift
done
rank="${OMPI_COMM_WORLD_RANK:-0}" via="${OMPI_COMM_WORLD_SIZE:+ (mpirun)}${FAKE_MARK:+ mark $FAKE_MARK}"
if [ "$rank" != 0 ]; then echo "rank $rank of $OMPI_COMM_WORLD_SIZE" >> "$FAKE_CALLS"; exit 0; fi
k=$(( $(grep -c '^attempt' "$FAKE_CALLS" 2> /dev/null || true) + 1 ))
echo "attempt $k: rank 0 of ${OMPI_COMM_WORLD_SIZE:-1}$via: $args" >> "$FAKE_CALLS"
if [ "$k" -le "$FAKE_FAILS" ]; then
    # mpirun ends the other ranks once one exits non-zero: wait (up to 30 s) until every other rank of this attempt
    # has recorded itself, or a slow start would lose its line
    others=$(( k * (${OMPI_COMM_WORLD_SIZE:-1} - 1) )) waited=0
    while [ "$(grep -c '^rank [1-9]' "$FAKE_CALLS")" -lt "$others" ] && [ "$waited" -lt 300 ]; do sleep 0.1; waited=$((waited + 1)); done
    n=$(printf %08d "$k")
    echo x > "$out/model_$n.bin"; echo x > "$out/state_$n.bin"; echo "$k" > "$out/latest"
    printf '{"step": %d, "loss": 1.0}\n{"step": %d, "loss": 1.0}\n' "$k" $((k + 1)) >> "$log"
    exit 1
fi
echo x > "$out/model_$(printf %08d "$steps").bin"
FAKE
    chmod +x "$T/fake"
    # real ENV... : run_training on the stand-in with OUT=$T/real/out (the calls in $T/real/calls), output in $T/real.out
    real() {
        env "$@" FAKE_CALLS="$T/real/calls" bash -c 'source scripts/run_lib.sh; sleep() { echo "sleep $*" >> "$FAKE_CALLS"; }
            run_init t; OUT="'"$T"'/real/out"; TRAINER="'"$T"'/fake"; ARGS=(--steps 3 --out "$OUT" --log "$OUT/log.jsonl"); run_training' > "$T/real.out" 2>&1
    }
    rm -rf "$T/real" && mkdir -p "$T/real"
    real GPUS_PER_NODE=1 FAKE_FAILS=2 MAX_RESTARTS=2 RESTART_DELAY=7
    rc=$?
    o="$T/real/out" problems=""
    [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 3 "$T/real.out" | tr '\n' ' ')"
    grep -q "^t: attempt 1 failed; retrying from the newest checkpoint in 7 s$" "$T/real.out" || problems="$problems; no retry after attempt 1"
    grep -q "^t: attempt 2 failed; retrying" "$T/real.out" || problems="$problems; no retry after attempt 2"
    grep -q "^t: complete ($o/model_00000003.bin exists)$" "$T/real.out" || problems="$problems; no 'complete' line"
    [ "$(grep -c '^attempt' "$T/real/calls")" = 3 ] || problems="$problems; $(grep -c '^attempt' "$T/real/calls") attempts (want 3)"
    [ "$(grep -c '^sleep 7$' "$T/real/calls")" = 2 ] || problems="$problems; not 2 waits of RESTART_DELAY 7 s: $(grep -c '^sleep' "$T/real/calls")"
    grep -q "^attempt 1: rank 0 of 1: --steps 3 --out $o --log $o/log.jsonl$" "$T/real/calls" || problems="$problems; attempt 1 not as given (and without mpirun): $(head -n 1 "$T/real/calls")"
    grep -q "^attempt 3: rank 0 of 1: --steps 3 --out $o --log $o/log.jsonl --resume $o$" "$T/real/calls" || problems="$problems; attempt 3 did not resume: $(tail -n 1 "$T/real/calls")"
    grep -q "^cut $o/log.jsonl back to step 2 (1 line(s)" "$T/real.out" || problems="$problems; the log was not cut back before the resume"
    [ "$(steps_of "$o/log.jsonl")" = "1 2" ] || problems="$problems; the log has steps '$(steps_of "$o/log.jsonl")' (want 1 2)"
    check "real: a failed attempt is retried RESTART_DELAY later from the newest checkpoint (--resume OUT), its log cut back, until the final checkpoint exists" "$problems"
    real GPUS_PER_NODE=1 FAKE_FAILS=0
    rc=$?
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc"
    grep -q "^t: complete" "$T/real.out" || problems="$problems; no 'complete' line"
    [ "$(grep -c '^attempt' "$T/real/calls")" = 3 ] || problems="$problems; the trainer ran again"
    check "real: re-running a complete run starts no trainer" "$problems"
    rm -rf "$T/real" && mkdir -p "$T/real"
    real GPUS_PER_NODE=1 FAKE_FAILS=9 MAX_RESTARTS=1
    rc=$?
    problems=""
    [ "$rc" = 1 ] || problems="exit $rc (want 1)"
    grep -q "^error: t: 2 attempts failed; the newest checkpoint is in $T/real/out$" "$T/real.out" || problems="$problems; no message: $(tail -n 1 "$T/real.out")"
    [ "$(grep -c '^attempt' "$T/real/calls")" = 2 ] || problems="$problems; $(grep -c '^attempt' "$T/real/calls") attempts (want 2: MAX_RESTARTS 1)"
    [ "$(grep -c '^sleep 30$' "$T/real/calls")" = 1 ] || problems="$problems; not 1 wait of the default 30 s"
    check "real: MAX_RESTARTS 1 gives up after 2 failed attempts (30 s apart by default), saying where the newest checkpoint is" "$problems"
    # a checkpoint whose latest is empty (a crash while writing it): the trainer names it; the log is left alone
    rm -rf "$T/real" && mkdir -p "$T/real/out" && : > "$T/real/out/latest" && echo x > "$T/real/out/state_00000001.bin"
    printf '{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 1.0}\n' > "$T/real/out/log.jsonl"
    real GPUS_PER_NODE=1 FAKE_FAILS=0
    check "real: an empty latest cuts nothing from the log" "$([ "$(steps_of "$T/real/out/log.jsonl")" = "1 2" ] || echo "the log has steps '$(steps_of "$T/real/out/log.jsonl")'")"
    rm -rf "$T/real" && mkdir -p "$T/real"
    real GPUS_PER_NODE=2 FAKE_FAILS=1 MAX_RESTARTS=1 MPIRUN_ARGS="--oversubscribe --bind-to none -x FAKE_MARK=through-mpirun-args"
    rc=$?
    problems=""
    [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 3 "$T/real.out" | tr '\n' ' ')"
    [ "$(grep -c '^attempt [12]: rank 0 of 2 (mpirun) mark through-mpirun-args: ' "$T/real/calls")" = 2 ] && [ "$(grep -c '^rank 1 of 2$' "$T/real/calls")" = 2 ] ||
        problems="$problems; not 2 ranks through mpirun with MPIRUN_ARGS in each of 2 attempts: $(tr '\n' '|' < "$T/real/calls")"
    check "real: GPUS_PER_NODE=2 launches 2 ranks through mpirun, with MPIRUN_ARGS, on each attempt" "$problems"
    # one process with a HOSTFILE naming another machine goes through mpirun, which asks its remote agent (a stand-in
    # for ssh that records the host and fails) to start it there
    rm -rf "$T/real" && mkdir -p "$T/real"
    echo "farhost.invalid slots=1" > "$T/hosts"
    printf '#!/usr/bin/env bash\necho "agent: $*" >> "%s"\nexit 1\n' "$T/real/calls" > "$T/agent" && chmod +x "$T/agent"
    real GPUS_PER_NODE=1 FAKE_FAILS=0 MAX_RESTARTS=0 HOSTFILE="$T/hosts" MPIRUN_ARGS="--mca plm_rsh_agent $T/agent"
    rc=$?
    check "real: one process with a HOSTFILE is started through mpirun on the hostfile's machine" \
        "$([ "$rc" = 1 ] && grep -q '^agent: farhost ' "$T/real/calls" || echo "exit $rc: $(tr '\n' '|' < "$T/real/calls" 2> /dev/null) $(tail -n 2 "$T/real.out")")"
    got="$(NODES=3 GPUS_PER_NODE=4 TP=2 PP=3 bash -c 'source scripts/run_lib.sh; run_init x; echo "$RUN_NP $RUN_DP"')"
    check "real: NODES 3 x GPUS_PER_NODE 4 with TP 2, PP 3 is 12 processes, dp 2" "$([ "$got" = "12 2" ] || echo "got '$got'")"
    for bad in "MAX_RESTARTS=x|MAX_RESTARTS='x' is not a whole number" "RESTART_DELAY=-1|RESTART_DELAY='-1' is not a whole number of seconds"; do
        real GPUS_PER_NODE=1 FAKE_FAILS=0 "${bad%%|*}"
        refused "real: ${bad%%|*} is refused" 2 $? "$T/real.out" "${bad#*|}"
    done
fi

if [[ "plot" =~ $ONLY ]]; then
    # scripts/plot_log.sh: the points it plots (--table) from logs in the trainer's format, a plot of two runs, and its
    # refusals. Run a: 64 tokens a step (tokens_per_s x ms / 1000 = 1000 x 64 ms), validated at steps 0 and 2, resumed
    # from step 1 (step 2 logged twice: the later line wins). Run b, named by LABEL=: a batch ramp's logged tokens.
    P="$T/plot" && mkdir -p "$P"
    printf '%s\n' '{"step": 0, "val_loss": 4.5}' \
        '{"step": 1, "loss": 4.25, "lr": 0.001, "grad_norm": 1.5, "ms": 64.000, "tokens_per_s": 1000.0}' \
        '{"step": 2, "loss": 9.75, "lr": 0.001, "grad_norm": 1.5, "ms": 64.000, "tokens_per_s": 1000.0}' \
        '{"step": 2, "loss": 4.0, "lr": 0.001, "grad_norm": 1.5, "ms": 32.000, "tokens_per_s": 2000.0}' \
        '{"step": 2, "val_loss": 3.5}' > "$P/a.jsonl"
    printf '%s\n' '{"step": 1, "loss": 5.0, "lr": 0.001, "grad_norm": 1.0, "ms": 10.000, "tokens_per_s": 1600.0, "tokens": 16}' \
        '{"step": 2, "loss": 4.5, "lr": 0.001, "grad_norm": 1.0, "ms": 10.000, "tokens_per_s": 3200.0, "tokens": 48}' > "$P/b.jsonl"
    got="$(bash scripts/plot_log.sh --table "$P/a.jsonl" ramp="$P/b.jsonl" 2>&1 | tr '\n' '|')"
    want="train a 64 4.25|train a 128 4.0|val a 0 4.5|val a 128 3.5|train ramp 16 5.0|train ramp 48 4.5|"
    check "plot: --table puts each step at its tokens (tokens_per_s x ms, or the logged tokens), the later of a repeated step, LABEL= names a run" \
        "$([ "$got" = "$want" ] || echo "got '$got'")"
    if command -v gnuplot > /dev/null; then
        bash scripts/plot_log.sh --title "two runs" --out "$P/two.svg" "$P/a.jsonl" ramp="$P/b.jsonl" > "$P/plot.out" 2>&1
        rc=$?
        problems=""
        [ "$rc" = 0 ] || problems="exit $rc: $(tail -n 2 "$P/plot.out" | tr '\n' ' ')"
        grep -q "^plot_log: wrote $P/two.svg$" "$P/plot.out" || problems="$problems; no 'wrote' line"
        for t in "two runs" "a train" "a val" "ramp train" "tokens/s"; do grep -q "$t" "$P/two.svg" 2> /dev/null || problems="$problems; no '$t' in the SVG"; done
        check "plot: an SVG of two runs, each with its training and validation curves and throughput" "$problems"
    else
        echo "SKIP plot: the SVG (gnuplot not installed)"
    fi
    : > "$P/empty.jsonl"
    printf '%s\n' '{"step": 0, "val_loss": 4.5}' > "$P/valonly.jsonl"
    for bad in "|no log given" "--bogus $P/a.jsonl|unknown flag '--bogus'" "$P/missing.jsonl|'$P/missing.jsonl' not found" \
               "--out $P/x.pdf $P/a.jsonl|--out '$P/x.pdf' must end in .svg or .png" "--table $P/valonly.jsonl|'$P/valonly.jsonl' has no training lines" \
               "--table $P/empty.jsonl|'$P/empty.jsonl' has no training lines"; do
        read -r -a a <<< "${bad%%|*}"
        bash scripts/plot_log.sh "${a[@]}" > "$P/bad.out" 2>&1
        refused "plot: refuses '${bad%%|*}' (${bad#*|})" 1 $? "$P/bad.out" "error: plot_log: ${bad#*|}"
    done
fi

[ "$failed" = 0 ] || echo "scratch kept: $T"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
