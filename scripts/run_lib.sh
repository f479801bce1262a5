# scripts/run_lib.sh: the mechanics shared by the reproduction scripts (scripts/run_gpt2_*.sh, scripts/run_gpt3_*.sh),
# sourced by each of them. A run script sets its hyperparameters and the train_gpt command line (the ARGS array) in
# plain sight; this file builds the trainer, prepares the data, launches the processes and resumes. Nothing here
# changes a hyperparameter of a real run, but for one the layout cannot take as given: a batch ramp's first batch
# below one micro-batch of every rank under pipeline parallelism, raised to it with a note (ramp_fit).
#
# Real run (the default):
#   - builds ./train_gpt_cu when a GPU is visible (nvidia-smi), else ./train_gpt (TRAINER=PATH picks one);
#   - prepares the data (the script's prepare step; each prepare script is idempotent);
#   - launches NODES x GPUS_PER_NODE processes: one process runs the trainer directly; more go through mpirun
#     (HOSTFILE=FILE for several machines, MPIRUN_ARGS for anything else, e.g. "--mca btl_tcp_if_include eth0");
#   - resumes: when --out already holds a checkpoint, --resume continues from the newest one (so re-running the
#     script continues the run), and a failed attempt is retried from the newest checkpoint up to MAX_RESTARTS
#     times (default 10, RESTART_DELAY seconds apart, default 30; scripts/elastic_run.sh restarts on fewer ranks
#     instead);
#   - a run whose final checkpoint exists is complete: the script says so and exits 0.
#
# DRY_RUN=1: the same configuration scaled down, on the CPU, in a minute: builds ./train_gpt, prepares a tiny local
# stand-in of the script's data through the same prepare scripts (committed files under tests/data, no network),
# then runs 2 optimizer steps with every flag of the real command line kept except the size of things: the model
# becomes d4 (4 layers, 256 channels: fewer layers, the same code paths), T 64, B 2, the data-parallel size at most 2
# (tensor and pipeline parallel sizes kept), gradient accumulation at most 2 micro-steps (a batch ramp: 2, from one
# sequence per rank to the whole batch over one batch of tokens, so 4 steps), evaluation, HellaSwag,
# samples and checkpoints every step or two; the table of what changed is printed first. Then it prints the planner's
# best layouts for the real size (./train_gpt --plan 1) on the script's machine. Output under
# DRY_RUN_DIR (default ${TMPDIR:-/tmp}/gpt_dry_run/NAME); a second dry run with the same DRY_RUN_DIR resumes, like a
# real one.

set -euo pipefail

RUN_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$RUN_REPO"
# shellcheck source=log_lib.sh
source "$RUN_REPO/scripts/log_lib.sh" # log_cut

DRY_RUN="${DRY_RUN:-0}"
[[ "$DRY_RUN" == 0 || "$DRY_RUN" == 1 ]] || { echo "error: DRY_RUN='$DRY_RUN' (0 or 1)" >&2; exit 2; }

# run_init NAME: the run's name (its output folder); call first, after the machine variables are set.
run_init() {
    RUN_NAME="$1"
    NODES="${NODES:-1}"
    GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
    TP="${TP:-1}"
    PP="${PP:-1}"
    for v in NODES GPUS_PER_NODE TP PP; do
        [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || { echo "error: $v='${!v}' is not a positive integer" >&2; exit 2; }
    done
    RUN_NP=$((NODES * GPUS_PER_NODE))
    if ((RUN_NP % (TP * PP) != 0)); then
        echo "error: $RUN_NP processes (NODES $NODES x GPUS_PER_NODE $GPUS_PER_NODE) do not split into TP $TP x PP $PP groups" >&2
        exit 2
    fi
    RUN_DP=$((RUN_NP / (TP * PP)))
    if [[ "$DRY_RUN" == 1 ]]; then
        DRY_ROOT="${DRY_RUN_DIR:-${TMPDIR:-/tmp}/gpt_dry_run}"
        OUT="$DRY_ROOT/$RUN_NAME/out"
        mkdir -p "$DRY_ROOT/$RUN_NAME"
    else
        OUT="${OUT:-out/$RUN_NAME}"
    fi
}

# data_dir NAME: where dataset NAME lives (data/NAME; in a dry run, its stand-in under DRY_RUN_DIR).
data_dir() {
    if [[ "$DRY_RUN" == 1 ]]; then echo "$DRY_ROOT/data/$1"; else echo "data/$1"; fi
}

# prepare_fineweb DIR VARIANT SAMPLE: FineWeb (VARIANT fineweb) or FineWeb-Edu (edu), sample SAMPLE (10BT or 100BT), as
# shards in DIR. Dry run: the committed parquet stand-in, in shards small enough for several of each split.
prepare_fineweb() {
    if [[ "$DRY_RUN" == 1 ]]; then
        FINEWEB_LOCAL="$RUN_REPO/tests/data/fineweb" FINEWEB_VARIANT="$2" FINEWEB_SAMPLE="$3" \
            FINEWEB_SHARD_SIZE=20000 FINEWEB_VAL_TOKENS=4000 bash scripts/prepare_fineweb.sh "$1"
    else
        FINEWEB_VARIANT="$2" FINEWEB_SAMPLE="$3" bash scripts/prepare_fineweb.sh "$1"
    fi
}

# prepare_hellaswag DIR: HellaSwag's validation set as an eval file DIR/hellaswag_val.bin (dry run: the committed
# 16-example tests/data/hellaswag_tiny.jsonl, in HellaSwag's own JSONL format).
prepare_hellaswag() {
    if [[ "$DRY_RUN" == 1 ]]; then
        HELLASWAG_JSONL="$RUN_REPO/tests/data/hellaswag_tiny.jsonl" bash scripts/prepare_hellaswag.sh "$1"
    else
        bash scripts/prepare_hellaswag.sh "$1"
    fi
}

# ----------------------------------------------------------------------------
# the command line (the ARGS array set by the run script)

# args_get FLAG: the value after FLAG in ARGS (empty if absent).
args_get() {
    local i
    for ((i = 0; i < ${#ARGS[@]} - 1; i++)); do
        if [[ "${ARGS[i]}" == "$1" ]]; then echo "${ARGS[i + 1]}"; return; fi
    done
}

# args_set FLAG VALUE: replaces FLAG's value in ARGS (appends FLAG VALUE if absent); records the change for the
# dry run's table.
args_set() {
    local i
    for ((i = 0; i < ${#ARGS[@]} - 1; i++)); do
        if [[ "${ARGS[i]}" == "$1" ]]; then
            [[ "${ARGS[i + 1]}" == "$2" ]] || DRY_CHANGES+=("$(printf '  %-20s %-28s -> %s' "$1" "${ARGS[i + 1]}" "$2")")
            ARGS[i + 1]="$2"
            return
        fi
    done
    DRY_CHANGES+=("$(printf '  %-20s %-28s -> %s' "$1" "(not set)" "$2")")
    ARGS+=("$1" "$2")
}

# run_steps: the run's optimizer steps: --steps, or more under a batch ramp (--batch-ramp-start S, --batch-ramp-tokens R),
# whose first steps are smaller. The trainer's ramp_walk in shell arithmetic: n = F/S - 1 levels of S (k + 1) tokens
# a step, level k lasting until ceil(R (k + 1) / n) tokens, then whole batches of F to --steps x F tokens.
run_steps() {
    local steps F S R
    steps="$(args_get --steps)"
    S="$(args_get --batch-ramp-start)"
    if [[ -z "$S" || "$S" == 0 ]]; then echo "$steps"; return; fi
    F="$(args_get --total-batch-size)"
    R="$(args_get --batch-ramp-tokens)"
    local budget=$((steps * F)) n_inc=$((F / S - 1)) done=0 n=0 k b end
    for ((k = 0; k <= n_inc && done < budget; k++)); do
        if ((k < n_inc)); then b=$((S * (k + 1))); end=$(((R * (k + 1) + n_inc - 1) / n_inc)); else b=$F; end=$budget; fi
        ((end > budget)) && end=$budget
        ((done >= end)) && continue
        local m=$(((end - done + b - 1) / b))
        done=$((done + m * b))
        n=$((n + m))
    done
    echo "$n"
}

# the final checkpoint, which marks a complete run
final_model() { printf '%s/model_%08d.bin' "$OUT" "$(run_steps)"; }

# ramp_fit: through a pipeline every micro-step is --batch-size sequences on each of the dp ranks, so a batch ramp's
# first batch below B x T x dp (GPT-3's 32k tokens, with a pipeline of few ranks per stage) is raised to the smallest
# multiple of it that divides the whole batch, with a note. Without a pipeline a step may end with a micro-step of
# fewer rows, and the script's value stands.
ramp_fit() {
    local S B T F micro fit
    S="$(args_get --batch-ramp-start)"
    [[ -n "$S" && "$S" != 0 ]] && ((PP > 1)) || return 0
    B="$(args_get --batch-size)"
    T="$(args_get --seq-len)"
    F="$(args_get --total-batch-size)"
    micro=$((B * T * RUN_DP))
    ((S % micro == 0)) && return 0
    fit=$(((S + micro - 1) / micro * micro))
    while ((fit < F && F % fit != 0)); do fit=$((fit + micro)); done
    ((fit < F)) || return 0 # (none fits: the trainer says why)
    echo "note: $RUN_NAME: --batch-ramp-start $S -> $fit: with PP $PP a step is whole micro-batches of $B x $T tokens on each of $RUN_DP data-parallel ranks"
    args_set --batch-ramp-start "$fit"
}

# ----------------------------------------------------------------------------
# launching

# launch NP CMD...: CMD on NP processes (mpirun when NP > 1 or HOSTFILE is set).
launch() {
    local np="$1"
    shift
    if ((np == 1)) && [[ -z "${HOSTFILE:-}" ]]; then
        "$@"
        return
    fi
    local mpi=(mpirun -np "$np")
    [[ "$(id -u)" == 0 ]] && mpi+=(--allow-run-as-root)
    if [[ "$DRY_RUN" == 1 ]]; then
        mpi+=(--oversubscribe)
    else
        [[ -n "${HOSTFILE:-}" ]] && mpi+=(--hostfile "$HOSTFILE")
        mpi+=(--map-by "ppr:$GPUS_PER_NODE:node")
    fi
    # shellcheck disable=SC2206 # MPIRUN_ARGS is a list of words by design
    [[ -n "${MPIRUN_ARGS:-}" ]] && mpi+=($MPIRUN_ARGS)
    "${mpi[@]}" "$@"
}

# resume_args: "--resume OUT" when OUT holds a checkpoint (the trainer takes the one OUT/latest names).
resume_args() {
    if compgen -G "$OUT/state_*.bin" > /dev/null; then echo "--resume $OUT"; fi
}

# cut_resumed_log: before a run resumes from OUT/latest's step, drops its log's lines of later steps (the resumed
# run repeats them), so log.jsonl holds every step once.
cut_resumed_log() {
    [[ -f "$OUT/latest" ]] && compgen -G "$OUT/state_*.bin" > /dev/null || return 0
    local step
    step="$(tr -d '[:space:]' < "$OUT/latest")"
    [[ "$step" =~ ^[0-9]+$ ]] || return 0 # the trainer names a malformed latest itself
    local log
    log="$(args_get --log)"
    log_cut "$log" "$step" || echo "warning: could not cut $log back to step $step: its later steps will appear twice"
}

# dry_scale: the real command line scaled down for the CPU (see the top of this file); sets DRY_NP.
dry_scale() {
    DRY_CHANGES=()
    local B T total dp accum
    B="$(args_get --batch-size)"
    T="$(args_get --seq-len)"
    total="$(args_get --total-batch-size)"
    dp=$((RUN_DP > 1 ? 2 : 1))
    accum=$((total / (B * T * RUN_DP)))
    ((accum < 1)) && accum=1
    ((accum > 2)) && accum=2
    local ramp
    ramp="$(args_get --batch-ramp-start)"
    [[ -n "$ramp" && "$ramp" != 0 ]] && accum=2 # (room for a ramp below the whole batch)
    DRY_NP=$((dp * TP * PP))
    echo "dry run: $RUN_NAME scaled down: $DRY_NP process(es) (dp $dp x tp $TP x pp $PP; the real run: dp $RUN_DP), $accum micro-step(s) per step"
    args_set --model d4
    args_set --seq-len 64
    args_set --batch-size 2
    args_set --total-batch-size $((2 * 64 * dp * accum))
    if [[ -n "$ramp" && "$ramp" != 0 ]]; then
        # from one sequence on each rank (a micro-step of fewer rows; through a pipeline, a whole micro-batch) to the
        # whole batch over its first batch of tokens
        if ((PP > 1)); then args_set --batch-ramp-start $((2 * 64 * dp)); else args_set --batch-ramp-start $((64 * dp)); fi
        args_set --batch-ramp-tokens $((2 * 64 * dp * accum))
    fi
    args_set --steps 2
    args_set --val-every 1
    args_set --val-steps 2
    [[ -n "$(args_get --hellaswag-every)" ]] && args_set --hellaswag-every 2
    [[ -n "$(args_get --sample-every)" ]] && args_set --sample-every 2
    [[ -n "$(args_get --gen-tokens)" ]] && args_set --gen-tokens 16
    args_set --checkpoint-every 1
    args_set --threads 1
    printf '%s\n' "${DRY_CHANGES[@]}"
}

# run_training: trains with ARGS (see the top of this file).
run_training() {
    local real_model real_T real_total
    real_model="$(args_get --model)"
    real_T="$(args_get --seq-len)"
    real_total="$(args_get --total-batch-size)"
    RUN_B="$(args_get --batch-size)"
    RUN_ZERO="$(args_get --zero)"
    RUN_RECOMPUTE="$(args_get --recompute)"
    RUN_DTYPE="$(args_get --dtype)"
    mkdir -p "$OUT"
    if [[ "$DRY_RUN" == 1 ]]; then
        dry_scale
        local final
        final="$(final_model)"
        if [[ -f "$final" ]]; then
            echo "dry run: $RUN_NAME is complete ($final exists)"
        else
            cut_resumed_log
            echo "dry run: ./train_gpt ${ARGS[*]} $(resume_args)"
            # shellcheck disable=SC2046 # resume_args is empty or two words
            launch "$DRY_NP" ./train_gpt "${ARGS[@]}" $(resume_args)
            [[ -f "$final" ]] || { echo "error: dry run: the run ended without its final checkpoint $final" >&2; exit 1; }
        fi
        local plan=(./train_gpt --plan 1 --model "$real_model" --seq-len "$real_T" --total-batch-size "$real_total"
            --plan-nodes "$NODES" --plan-devices-per-node "$GPUS_PER_NODE" --plan-memory-gb "${GPU_MEMORY_GB:-80}" --plan-storage gpu)
        echo "dry run: the planner's best layouts for the real run ($real_model, T $real_T, $real_total tokens per step) on $NODES x $GPUS_PER_NODE GPUs of ${GPU_MEMORY_GB:-80} GB:"
        "${plan[@]}" --plan-top 3
        # the script's own layout must be one the planner finds fitting: its row (dp tp pp | zero B recompute dtype)
        local row sched="-"
        ((PP > 1)) && sched="$(args_get --pp-schedule)" && sched="${sched:-1f1b}"
        row="$("${plan[@]}" --plan-top 1000000 | grep -E "^ *[0-9]+ \| +$RUN_DP +$TP +$PP \| +$RUN_ZERO +$RUN_B +$RUN_RECOMPUTE +$RUN_DTYPE +0 +$sched " | head -1 || true)"
        if [[ -z "$row" ]]; then
            echo "error: dry run: the planner finds no fitting layout dp $RUN_DP tp $TP pp $PP zero $RUN_ZERO B $RUN_B recompute $RUN_RECOMPUTE $RUN_DTYPE (schedule $sched): the real run would not fit (./train_gpt --plan 1 --plan-verbose 1 ... says why)" >&2
            exit 1
        fi
        echo "dry run: this script's layout in the plan (dp $RUN_DP tp $TP pp $PP zero $RUN_ZERO B $RUN_B recompute $RUN_RECOMPUTE $RUN_DTYPE, schedule $sched):"
        echo "$row"
        echo "dry run: $RUN_NAME passed"
        return
    fi
    ramp_fit
    local final attempt=0 max="${MAX_RESTARTS:-10}" delay="${RESTART_DELAY:-30}"
    [[ "$max" =~ ^[0-9]+$ ]] || { echo "error: MAX_RESTARTS='$max' is not a whole number" >&2; exit 2; }
    [[ "$delay" =~ ^[0-9]+$ ]] || { echo "error: RESTART_DELAY='$delay' is not a whole number of seconds" >&2; exit 2; }
    final="$(final_model)"
    while true; do
        if [[ -f "$final" ]]; then
            echo "$RUN_NAME: complete ($final exists)"
            return
        fi
        if ((attempt > max)); then
            echo "error: $RUN_NAME: $attempt attempts failed; the newest checkpoint is in $OUT" >&2
            exit 1
        fi
        ((attempt > 0)) && { echo "$RUN_NAME: attempt $attempt failed; retrying from the newest checkpoint in $delay s"; sleep "$delay"; }
        attempt=$((attempt + 1))
        cut_resumed_log
        # shellcheck disable=SC2046
        launch "$RUN_NP" "$TRAINER" "${ARGS[@]}" $(resume_args) || true
    done
}

# build: the trainer (and the tokenizer and the parquet reader for the data). Sets TRAINER.
build() {
    if [[ "$DRY_RUN" == 1 ]]; then
        make -s train_gpt tokenize parquet_text
        TRAINER=./train_gpt
        return
    fi
    if [[ -z "${TRAINER:-}" ]]; then
        if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then TRAINER=./train_gpt_cu; else TRAINER=./train_gpt; fi
    fi
    make -s "${TRAINER#./}" tokenize parquet_text
}
