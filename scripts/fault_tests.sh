#!/usr/bin/env bash
# scripts/fault_tests.sh: fault tests of ./train_gpt, run by `make test` (scripts/run_tests.sh).
#
# What it checks (one group per function below; tiny d2 runs, 1 thread each):
#   kill   kill -9 at random moments during training and checkpoint writes (FAULT_TRIALS trials, kill times drawn
#          from FAULT_SEED, printed); `--resume DIR` must then continue bit for bit (logged loss and grad_norm strings
#          of every later step, and the final model and state files, equal those of an uninterrupted run), or be
#          refused with an `error:` line naming DIR when the kill came before the first checkpoint (then a fresh run
#          into DIR must match from step 1); DIR must hold no `*.tmp.*` file after the second run.
#   keep   --keep-checkpoints: the default keeps the last 3 checkpoints, 0 keeps all, 1 only the last.
#   disk   a full disk (a 100 MB tmpfs; SKIP where mounting is not allowed): the second checkpoint does not fit:
#          exit 1, one `error:` line naming the file and "No space left on device", the first checkpoint intact
#          and `latest` at it, no temp or unpaired file, and `--resume` from it continues bit for bit.
#   ulimit `ulimit -f` below the state file's size: no death by SIGXFSZ (exit 153) but exit 1 with an `error:` line
#          naming the file and "File too large"; no temp file; no unpaired model file.
#   poison model files with one float overwritten: NaN in a padded wte row, +Inf in an ordinary wte row, NaN in an
#          unused wpe row must be refused by --init (exit 1, `error:` naming the file, the tensor and "non-finite");
#          a 1e30 weight in layer 0's qkvw, and one in its fcw, is refused too (no trained weight is near 1e8:
#          in qkvw such a weight saturates the softmax and would "train" with a finite loss, learning nothing).
#   nan    TRAIN_GPT_FAULT=nan:0:2 (the loss of the 0-based step 2 becomes NaN): --nan-policy stop (default) ends
#          with an error naming the step and no checkpoint from that state; --nan-policy skip skips it ("skipped" on
#          stdout, parameters and AdamW moments unchanged: checkpoints 2 and 3 equal) and --max-skipped-steps 1
#          makes the same fault an error.
#   flags  absurd flags: exit 1, exactly one `error:` line naming the flag, no output directory created.
#
# Output: one line per check, `PASS name` or `FAIL name: detail` (`SKIP ...` and `# ...` lines are information),
# then `N passed, M failed`; the exit status is non-zero if any check failed.
#
# Run from anywhere (it changes to the repository root), after `make`:
#     bash scripts/fault_tests.sh                 # every group (about a minute on a quiet machine)
#     bash scripts/fault_tests.sh kill flags      # some groups only
#     FAULT_SEED=123 FAULT_TRIALS=40 bash scripts/fault_tests.sh kill    # other kill times / more trials
#     TRAIN_GPT=/path/to/train_gpt bash scripts/fault_tests.sh            # another binary
#     FAULT_EXTRA_ARGS="--dtype bf16" bash scripts/fault_tests.sh kill   # every run with more flags (make test: bf16 kills)
# A failed kill trial is reproduced (as far as timing allows) with the printed seed. Scratch files live under
# ${TMPDIR:-/tmp}/fault_tests.XXXXXX and are removed at exit (the tmpfs, if mounted, is unmounted first).
set -u
cd "$(dirname "$0")/.." || exit 1
unset TRAIN_GPT_FAULT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 LC_ALL=C

TRAIN="${TRAIN_GPT:-./train_gpt}"
SEED="${FAULT_SEED:-20240520}"
TRIALS="${FAULT_TRIALS:-24}"
GROUPS_RUN="${*:-kill keep disk ulimit poison nan flags}"
RUN_TIMEOUT=60        # seconds any single foreground run may take
passed=0
failed=0

S=$(mktemp -d "${TMPDIR:-/tmp}/fault_tests.XXXXXX") || { echo "FAIL setup: cannot create a scratch directory"; echo "0 passed, 1 failed"; exit 1; }
MNTS=()         # tmpfs mount points while mounted
BGPID=""        # the background trainer of a kill trial while it runs
cleanup() {
    if [ -n "$BGPID" ]; then kill -9 "$BGPID" 2>/dev/null; wait "$BGPID" 2>/dev/null; fi
    local m
    for m in "${MNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
    rm -rf "$S"
}
# mount_tmpfs DIR SIZE: mounts a tmpfs (remembered for the clean-up); where not allowed, fails with the reason in WHY
mount_tmpfs() {
    mkdir -p "$1"
    WHY=$(mount -t tmpfs -o "size=$2" tmpfs "$1" 2>&1) || { WHY=$(echo "${WHY:-mount failed}" | head -n 1); return 1; }
    MNTS+=("$1")
}
unmount() {
    umount "$1" 2>/dev/null || umount -l "$1"
    local m keep=(); for m in "${MNTS[@]}"; do [ "$m" = "$1" ] || keep+=("$m"); done; MNTS=("${keep[@]}")
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ----------------------------------------------------------------------------
# helpers

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
check() { if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi; }   # check NAME PROBLEMS ("" = pass)

# trun OUT ARGS...: runs the trainer under a timeout, stdout+stderr to OUT; sets rc
trun() {
    local out="$1"; shift
    timeout "$RUN_TIMEOUT" "$TRAIN" "$@" > "$out" 2>&1
    rc=$?
}

errors() { grep '^error:' "$1"; }                    # the error: lines of an output file
nerrors() { grep -c '^error:' "$1"; }
last_line() { grep -v '^[|+ ]' "$1" | grep -v '^  *[0-9]' | tail -n 1 | cut -c1-200; }
# what a run did, for FAIL details: exit status, its error: lines (or its last line)
seen() {
    local e; e=$(errors "$1" | head -n 3 | tr '\n' ' ' | cut -c1-300)
    [ -n "$e" ] && echo "exit $2, ${e% }" || echo "exit $2, no error: line (last line: $(last_line "$1"))"
}

tmp_files() { local f; for f in "$1"/*.tmp.*; do [ -e "$f" ] && printf '%s ' "${f##*/}"; done; }
ckpt_steps() { ls -1 "$1" 2>/dev/null | sed -n "s/^$2_\([0-9]\{8\}\)\.bin$/\1/p" | sed 's/^0*\([0-9]\)/\1/' | tr '\n' ' '; }  # DIR model|state
unpaired() {    # model or state files without their partner
    local d="$1" f s r=""
    for f in "$d"/model_????????.bin "$d"/state_????????.bin; do
        [ -e "$f" ] || continue
        s=$(basename "$f"); s=${s#*_}
        [ -e "$d/model_$s" ] && [ -e "$d/state_$s" ] || r="$r$(basename "$f") "
    done
    echo "$r"
}

# log_values LOG: "step loss grad_norm" for each training step line of a --log file (printed strings, unparsed)
log_values() {
    awk 'function f(k,  m) { if (match($0, "\"" k "\": *[^,}]*")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", m); return m } return "?" }
         /"loss"/ { print f("step"), f("loss"), f("grad_norm") }' "$1" 2>/dev/null
}
# compare_logs REF LOG FROM: LOG's steps must be exactly REF's steps after FROM, strings equal; prints the problem
compare_logs() {
    local want got
    want=$(log_values "$1" | awk -v from="$3" '$1 > from')
    got=$(log_values "$2")
    [ "$want" = "$got" ] && return 0
    local d
    d=$(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -n 2 | tr '\n' ' ')
    echo "logged steps after $3 differ from the uninterrupted run (< uninterrupted, > resumed): ${d% }"
}

# poke FILE FLOAT_INDEX BYTES: overwrites the float at FLOAT_INDEX (after the 1024-byte header) with 4 raw bytes
poke() { printf "$3" | dd of="$1" bs=4 seek=$((256 + $2)) conv=notrunc status=none; }
NAN='\x00\x00\xc0\x7f'; INF='\x00\x00\x80\x7f'; BIG='\xca\xf2\x49\x71'   # little-endian float32 NaN, +Inf, 1e30

# 31-bit LCG (bash arithmetic, so the sequence is the same everywhere); rnd MAX sets R to 0..MAX-1
RNG=$SEED
rnd() { RNG=$(( (RNG * 1103515245 + 12345) % 2147483648 )); R=$(( (RNG / 65536) % $1 )); }

mkfifo "$S/never" && exec 9<> "$S/never"
nap() { read -r -t "$1" -u 9 _; }     # nap SECONDS (fractional), no fork

ms_now() { echo $(( $(date +%s%N) / 1000000 )); }

# a small llm.c shard: 256 int32 header (magic 20240520, version 1, token count), then uint16 tokens < 50257
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
make_shard() {
    local n=4096
    {
        printf "$(le32 20240520)$(le32 1)$(le32 $n)"
        head -c 1012 /dev/zero
        awk -v n=$n 'BEGIN { srand(7); for (i = 0; i < n; i++) printf "%c%c", 1 + int(rand() * 255), 1 + int(rand() * 195) }'
    } > "$1"
}

# ----------------------------------------------------------------------------
# setup: the shard, the flags, and the uninterrupted reference run (its log, its final checkpoint, its duration)

SHARD="$S/shard.bin"
make_shard "$SHARD"
# checkpoints of the reference run, the kill trials, keep and nan go to a tmpfs where one can be mounted: a kill -9
# leaves the same files on any filesystem (no power loss here), and 84 MB fsync'ed to a shared disk per checkpoint
# would triple the running time
FAST="$S/fast"
if mount_tmpfs "$FAST" 2g; then FAST_NOTE="a tmpfs"; else FAST_NOTE="the scratch filesystem (no tmpfs: $WHY)"; fi
STEPS=4
# d2 (L 2, C 128): a checkpoint is 28 MB model + 56 MB state; 2 micro-steps of 1 x 16 per optimizer step
BASE=(--model d2 --train "$SHARD" --batch-size 1 --seq-len 16 --total-batch-size 32 --threads 1 --seed 3 --lr 1e-3 ${FAULT_EXTRA_ARGS:-})
FLAGS=("${BASE[@]}" --steps "$STEPS")
REF="$FAST/ref"
REF_LOG="$S/ref.jsonl"
REF_MS=0
REF_OK=0
ref_model() { printf '%s/model_%08d.bin' "$REF" "$1"; }

# log_lines LOG: sets NL to the number of lines in LOG (no fork: polled every few ms)
log_lines() { NL=0; [ -e "$1" ] && { mapfile -t _L < "$1"; NL=${#_L[@]}; }; }

# The reference run: in the background, its log polled, so that IV[j] is the time from the end of step j (j = 0:
# the launch) to the end of step j+1, which covers checkpoint j's write and step j+1 (used to place kill times)
setup_reference() {
    if [ ! -x "$TRAIN" ]; then fail "setup" "$TRAIN is not built (run make)"; return; fi
    local t0 tj j=0; t0=$(ms_now); tj=$t0
    "$TRAIN" "${FLAGS[@]}" --checkpoint-every 1 --out "$REF" --log "$REF_LOG" > "$S/ref.out" 2>&1 &
    BGPID=$!
    local deadline=$((t0 + RUN_TIMEOUT * 1000)) now
    while kill -0 "$BGPID" 2>/dev/null; do
        log_lines "$REF_LOG"
        now=$(ms_now)
        while [ "$NL" -gt "$j" ] && [ "$j" -lt $STEPS ]; do IV[$j]=$((now - tj)); tj=$now; j=$((j + 1)); done
        [ "$now" -lt "$deadline" ] || kill -9 "$BGPID"
        nap 0.003
    done
    wait "$BGPID"; rc=$?; BGPID=""
    REF_MS=$(( $(ms_now) - t0 ))
    local n; n=$(log_values "$REF_LOG" | wc -l)
    if [ "$rc" -ne 0 ] || [ "$n" -ne $STEPS ] || [ "$j" -ne $STEPS ] || [ ! -f "$(ref_model $STEPS)" ]; then
        fail "uninterrupted reference run" "$(seen "$S/ref.out" $rc), $n logged steps"
        return
    fi
    REF_OK=1
    pass "uninterrupted reference run ($STEPS steps, checkpoint every step, $REF_MS ms)"
    echo "# reference run: ms from the launch to the end of step 1, then from each step's end to the next: ${IV[*]}"
}

# ----------------------------------------------------------------------------
# kill: kill -9 at a random moment, then resume (or start afresh) and require bit-exact continuation

# where the killed run was, from what it left: temp files, checkpoint files, `latest`, its log (flushed every step)
kill_phase() {
    local d="$1" krc="$2" t k l
    if [ "$krc" -eq 0 ]; then echo "after the run ended"; return; fi
    t=$(tmp_files "$d")
    if [ -n "$t" ]; then t=${t%% *}; echo "while writing ${t%%.tmp.*}"; return; fi
    k=$(log_values "$d.killed.jsonl" | tail -n 1 | awk '{print $1}')
    l=$(cat "$d/latest" 2>/dev/null)
    [ -n "$k" ] || { echo "before step 1 ended"; return; }
    if [ "$k" = "$l" ]; then echo "in step $((k + 1)) (checkpoint $k complete)"; return; fi
    local c; c=$(printf %08d "$k")
    if [ -e "$d/state_$c.bin" ]; then echo "after step $k, between state_$c.bin and latest"
    elif [ -e "$d/model_$c.bin" ]; then echo "after step $k, between model_$c.bin and state_$c.bin"
    else echo "after step $k, before checkpoint $k"; fi
}

# one kill -9 trial: run in the background and kill it at a moment that depends on the trial's kind, then resume.
# Odd trials: a random time within a random interval j (from the end of step j, or the launch, to the end of step
# j+1: checkpoint j's write, then step j+1), scaled by the reference run's IV[j]. Even trials: once the temporary
# file of a random checkpoint file appears, i.e. during its write (or right after, if the write was too quick to see).
kill_trial() {
    local k="$1" d="$FAST/kill$1" how krc phase latest name probs="" target="" delay_ms=0 after=0
    rm -rf "$d" "$d".*
    if [ $((k % 2)) -eq 1 ]; then
        rnd $STEPS; after=$R
        rnd 1000; delay_ms=$(( IV[after] * R / 1000 ))
        how="$delay_ms ms after $([ "$after" -eq 0 ] && echo launch || echo "step $after")"
    else
        rnd $STEPS; local c; c=$(printf %08d $((R + 1)))
        rnd 2; [ "$R" -eq 0 ] && target="model_$c.bin" || target="state_$c.bin"
        how="writing $target"
    fi
    "$TRAIN" "${FLAGS[@]}" --checkpoint-every 1 --out "$d" --log "$d.killed.jsonl" > "$d.killed.out" 2>&1 &
    BGPID=$!
    local deadline=$(( $(ms_now) + RUN_TIMEOUT * 1000 ))
    if [ -z "$target" ]; then
        NL=0
        while [ "$NL" -lt "$after" ] && kill -0 "$BGPID" 2>/dev/null && [ "$(ms_now)" -lt "$deadline" ]; do
            log_lines "$d.killed.jsonl"; [ "$NL" -ge "$after" ] || nap 0.003
        done
        nap "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    else
        local f seen_it=0
        while [ "$seen_it" -eq 0 ] && kill -0 "$BGPID" 2>/dev/null && [ "$(ms_now)" -lt "$deadline" ]; do
            for f in "$d/$target".tmp.* "$d/$target"; do [ -e "$f" ] && seen_it=1; done
            [ "$seen_it" -eq 1 ] || nap 0.003
        done
    fi
    kill -9 "$BGPID" 2>/dev/null
    wait "$BGPID" 2>/dev/null
    krc=$?
    BGPID=""
    phase=$(kill_phase "$d" "$krc")
    case "$phase" in while*) n_write=$((n_write + 1)) ;; "before step 1"*) n_early=$((n_early + 1)) ;; "after the run"*) n_late=$((n_late + 1)) ;; *) n_step=$((n_step + 1)) ;; esac
    latest=$(cat "$d/latest" 2>/dev/null)
    name="kill -9 trial $k ($how, killed $phase),"
    if [ -n "$latest" ]; then
        trun "$d.resumed.out" "${FLAGS[@]}" --checkpoint-every 1 --out "$d" --resume "$d" --log "$d.resumed.jsonl"
        if [ "$rc" -ne 0 ]; then
            probs="--resume from step $latest: $(seen "$d.resumed.out" $rc)"
        else
            probs=$(compare_logs "$REF_LOG" "$d.resumed.jsonl" "$latest")
            local f
            for f in "model_$(printf %08d $STEPS).bin" "state_$(printf %08d $STEPS).bin"; do
                [ -z "$probs" ] && ! cmp -s "$REF/$f" "$d/$f" && probs="the final $f differs from the uninterrupted run's (or is missing)"
            done
        fi
        check "$name --resume from step $latest continues bit for bit" "$probs"
    else
        # no checkpoint yet: --resume must be refused, naming the directory; a fresh run must then match
        trun "$d.resumed.out" "${FLAGS[@]}" --checkpoint-every 1 --out "$d" --resume "$d" --log "$d.resumed.jsonl"
        if [ "$rc" -ne 1 ] || ! errors "$d.resumed.out" | grep -qF "$d"; then
            probs="--resume of a directory without a checkpoint: expected exit 1 and an error: line naming $d; got $(seen "$d.resumed.out" $rc)"
        else
            trun "$d.fresh.out" "${FLAGS[@]}" --checkpoint-every 1 --out "$d" --log "$d.fresh.jsonl"
            if [ "$rc" -ne 0 ]; then probs="fresh run into $d: $(seen "$d.fresh.out" $rc)"
            else probs=$(compare_logs "$REF_LOG" "$d.fresh.jsonl" 0); fi
        fi
        check "$name no checkpoint yet, --resume refused naming the directory, a fresh run matches" "$probs"
    fi
    local t; t=$(tmp_files "$d")
    check "kill -9 trial $k, no temp file left after the next run" "${t:+left in $d: ${t% }}"
    rm -rf "$d" "$d".*
}

test_kill() {
    [ "$REF_OK" -eq 1 ] || { fail "kill -9 trials" "no reference run"; return; }
    echo "# kill -9 trials: $TRIALS, seed $SEED (FAULT_SEED=$SEED FAULT_TRIALS=$TRIALS to repeat), checkpoints on $FAST_NOTE," \
         "reference run $REF_MS ms"
    local k
    n_write=0; n_step=0; n_early=0; n_late=0
    for k in $(seq 1 "$TRIALS"); do kill_trial "$k"; done
    echo "# kill -9 trials: killed $n_write times during a checkpoint write, $n_step times in or between steps," \
         "$n_early times before step 1 ended, $n_late times after the run ended"
}

# ----------------------------------------------------------------------------
# keep: --keep-checkpoints N keeps the last N checkpoints (default 3, 0 keeps all)

test_keep() {
    local want got
    if [ "$REF_OK" -eq 1 ]; then
        want="$(seq -s ' ' $((STEPS - 2)) $STEPS) "
        got="$(ckpt_steps "$REF" model)/ $(ckpt_steps "$REF" state)"
        [ "$got" = "$want/ $want" ] && pass "--keep-checkpoints default 3 keeps the last 3 checkpoints" ||
            fail "--keep-checkpoints default 3 keeps the last 3 checkpoints" "after $STEPS steps with a checkpoint every step: model steps / state steps = $got; expected $want"
    fi
    local n
    for n in 0 1; do
        local d="$FAST/keep$n" kname="--keep-checkpoints $n keeps $([ $n -eq 0 ] && echo all checkpoints || echo the last one)"
        trun "$S/keep$n.out" "${BASE[@]}" --steps 3 --checkpoint-every 1 --out "$d" --keep-checkpoints $n
        [ "$n" -eq 0 ] && want="1 2 3 " || want="3 "
        got="$(ckpt_steps "$d" model)/ $(ckpt_steps "$d" state)"
        if [ "$rc" -ne 0 ]; then fail "$kname" "$(seen "$S/keep$n.out" $rc)"
        elif [ "$got" != "$want/ $want" ] || [ "$(cat "$d/latest" 2>/dev/null)" != 3 ]; then
            fail "$kname" "after 3 steps: model steps / state steps = $got, latest $(cat "$d/latest" 2>/dev/null); expected $want"
        else pass "$kname"; fi
        rm -rf "$d"
    done
}

# ----------------------------------------------------------------------------
# disk: a full disk during the second checkpoint (100 MB tmpfs: one 84 MB checkpoint fits, two do not)

test_disk() {
    local m="$S/tmpfs"
    if ! mount_tmpfs "$m" 100m; then
        echo "SKIP full disk: cannot mount a tmpfs here ($WHY; uid $EUID)"
        return
    fi
    local d="$m/ck" name="full disk,"
    trun "$S/full.out" "${FLAGS[@]}" --checkpoint-every 1 --out "$d" --log "$S/full.jsonl"
    local e; e=$(errors "$S/full.out")
    local probs=""
    if [ "$rc" -ne 1 ]; then probs="expected exit 1; $(seen "$S/full.out" $rc)"
    elif [ "$(nerrors "$S/full.out")" -ne 1 ]; then probs="expected one error: line, got: $(echo "$e" | tr '\n' ' ')"
    elif ! echo "$e" | grep -qE "$d/(model|state)_00000002\.bin" || ! echo "$e" | grep -q "No space left on device"; then
        probs="the error: line should name $d/model_00000002.bin (or state_) and 'No space left on device': $e"
    fi
    check "$name exit 1 with one error line naming the file and ENOSPC" "$probs"
    probs=""
    [ "$(cat "$d/latest" 2>/dev/null)" = 1 ] || probs="latest is '$(cat "$d/latest" 2>/dev/null)', expected 1; "
    [ -f "$d/model_00000001.bin" ] && [ -f "$d/state_00000001.bin" ] || probs="${probs}checkpoint 1 is gone; "
    local t u; t=$(tmp_files "$d"); u=$(unpaired "$d")
    [ -z "$t" ] || probs="${probs}temp files left: ${t% }; "
    [ -z "$u" ] || probs="${probs}unpaired files: ${u% }; "
    check "$name checkpoint 1 intact, latest at it, no temp or unpaired file" "${probs%; }"
    # resume only reads: continue from checkpoint 1 without writing checkpoints, bit for bit
    trun "$S/full_resume.out" "${FLAGS[@]}" --resume "$d" --log "$S/full_resume.jsonl"
    if [ "$rc" -ne 0 ]; then probs=$(seen "$S/full_resume.out" $rc)
    elif [ "$REF_OK" -eq 1 ]; then probs=$(compare_logs "$REF_LOG" "$S/full_resume.jsonl" 1)
    else probs=""; fi
    check "$name --resume from the surviving checkpoint continues bit for bit" "$probs"
    unmount "$m"
}

# ----------------------------------------------------------------------------
# ulimit: a file size limit below the state file (40 MB: the 28 MB model file fits, the 56 MB state does not)

test_ulimit() {
    local d="$S/ulimit" name="ulimit -f,"
    (ulimit -f 40000; exec timeout "$RUN_TIMEOUT" "$TRAIN" "${BASE[@]}" --steps 2 --checkpoint-every 1 --out "$d") > "$S/ulimit.out" 2>&1
    rc=$?
    local e probs=""; e=$(errors "$S/ulimit.out")
    if [ "$rc" -eq 153 ]; then probs="killed by SIGXFSZ (exit 153)"
    elif [ "$rc" -ne 1 ]; then probs="expected exit 1; $(seen "$S/ulimit.out" $rc)"
    elif ! echo "$e" | grep -qE "$d/(model|state)_00000001\.bin" || ! echo "$e" | grep -q "File too large"; then
        probs="the error: line should name the checkpoint file and 'File too large': $e"
    else
        local t; t=$(tmp_files "$d")
        [ -z "$t" ] || probs="temp files left: ${t% }"
    fi
    check "$name exit 1 with an error line naming the file and EFBIG, no temp file" "$probs"
    local u; u=$(unpaired "$d")
    check "$name no unpaired checkpoint file" "${u:+left: ${u% }}"
}

# ----------------------------------------------------------------------------
# poison: model files with one non-finite or absurd float

test_poison() {
    [ "$REF_OK" -eq 1 ] || { fail "poisoned model files" "no reference model file"; return; }
    local src; src=$(ref_model $STEPS)
    # header: magic, version, maxT, V, L, NH, C, Vp
    local maxT L C Vp
    read -r _ _ maxT _ L _ C Vp <<< "$(od -An -t d4 -N 32 "$src" | tr '\n' ' ')"
    if ! [ "${Vp:-0}" -gt 0 ] 2>/dev/null; then fail "poisoned model files" "cannot read the header of $src"; return; fi
    # offsets in floats, llm.c order: wte (Vp,C), wpe (maxT,C), ln1w, ln1b, qkvw (L,3C,C), qkvb, attprojw (L,C,C),
    # attprojb, ln2w, ln2b, fcw (L,4C,C), ...
    local wpe=$((Vp * C)) qkvw=$((Vp * C + maxT * C + 2 * L * C))
    local fcw=$((qkvw + L * 3 * C * C + L * 3 * C + L * C * C + L * C + 2 * L * C))
    local -a cases=(
        "NaN in a padded wte row|wte|$(( (Vp - 1) * C + 3 ))|$NAN"
        "+Inf in an ordinary wte row|wte|$(( 1000 * C + 7 ))|$INF"
        "NaN in an unused wpe row|wpe|$(( wpe + (maxT - 1) * C ))|$NAN"
    )
    local c
    for c in "${cases[@]}"; do
        IFS='|' read -r what tensor idx bytes <<< "$c"
        local f="$S/poison.bin"
        cp "$src" "$f"; poke "$f" "$idx" "$bytes"
        trun "$S/poison.out" "${BASE[@]}" --steps 2 --init "$f"
        local e; e=$(errors "$S/poison.out")
        if [ "$rc" -eq 1 ] && echo "$e" | grep -qF "$f" && echo "$e" | grep -qw "$tensor" && echo "$e" | grep -qi "non-finite"; then
            pass "poisoned model, $what is refused by --init"
        else
            fail "poisoned model, $what is refused by --init" "expected exit 1 and an error: naming $f, '$tensor' and 'non-finite'; got $(seen "$S/poison.out" $rc)"
        fi
    done
    # 1e30 in an ordinary matrix: finite, but no trained weight is anywhere near it (in fcw it would overflow to a
    # NaN gradient norm; in the query part of qkvw it would saturate the softmax and train on with a finite loss)
    local f="$S/poison.bin" w
    for w in "qkvw|$qkvw" "fcw|$fcw"; do
        cp "$src" "$f"; poke "$f" "${w#*|}" "$BIG"
        trun "$S/poison.out" "${BASE[@]}" --steps 3 --init "$f" --log "$S/poison.jsonl"
        local e; e=$(errors "$S/poison.out")
        if [ "$rc" -eq 1 ] && echo "$e" | grep -qF "$f" && echo "$e" | grep -qF "'${w%|*}.0'" && echo "$e" | grep -qi "damaged"; then
            pass "poisoned model, a 1e30 weight in layer 0's ${w%|*} is refused by --init naming the tensor"
        else
            fail "poisoned model, a 1e30 weight in layer 0's ${w%|*} is refused by --init naming the tensor" \
                 "$(seen "$S/poison.out" $rc); logged (step loss grad_norm): $(log_values "$S/poison.jsonl" | tr '\n' ';')"
        fi
        rm -f "$S/poison.jsonl"
    done
    rm -f "$f"
}

# ----------------------------------------------------------------------------
# nan: TRAIN_GPT_FAULT=nan:0:2 makes the loss of the third step (0-based step 2, printed "step 3/N") NaN

test_nan() {
    local d="$FAST/nanstop" probs=""
    TRAIN_GPT_FAULT=nan:0:2 trun "$S/nanstop.out" "${BASE[@]}" --steps 4 --checkpoint-every 1 --out "$d"
    local e; e=$(errors "$S/nanstop.out")
    if [ "$rc" -ne 1 ] || [ "$(nerrors "$S/nanstop.out")" -ne 1 ]; then probs="expected exit 1 and one error: line; got $(seen "$S/nanstop.out" $rc)"
    elif ! echo "$e" | grep -qE "step (2|3)([^0-9]|$)"; then probs="the error: line does not name step 3 (0-based 2): $e"
    elif [ "$(cat "$d/latest" 2>/dev/null)" != 2 ] || [ -e "$d/model_00000003.bin" ] || [ -e "$d/state_00000003.bin" ]; then
        probs="expected latest 2 and no checkpoint 3; latest '$(cat "$d/latest" 2>/dev/null)', files: $(ls "$d" 2>/dev/null | tr '\n' ' ')"
    fi
    check "--nan-policy stop (default), error naming the step, no checkpoint from the NaN state" "$probs"
    rm -rf "$d"

    d="$FAST/nanskip"; probs=""
    TRAIN_GPT_FAULT=nan:0:2 timeout "$RUN_TIMEOUT" "$TRAIN" "${BASE[@]}" --steps 4 --checkpoint-every 1 --out "$d" --nan-policy skip \
        > "$S/nanskip.out" 2> "$S/nanskip.err"
    rc=$?
    if [ "$rc" -ne 0 ]; then probs=$(seen "$S/nanskip.err" $rc)
    elif ! grep -q skipped "$S/nanskip.out"; then probs="no message containing 'skipped' on stdout (last line: $(last_line "$S/nanskip.out"))"
    elif ! cmp -s "$d/model_00000002.bin" "$d/model_00000003.bin"; then probs="parameters changed by the skipped step (model_00000002.bin != model_00000003.bin, or missing)"
    elif ! cmp -s -i 512 "$d/state_00000002.bin" "$d/state_00000003.bin"; then probs="AdamW moments changed by the skipped step (state files 2 and 3 differ after the 512-byte header)"
    fi
    check "--nan-policy skip, the NaN step is skipped, parameters and moments unchanged" "$probs"
    rm -rf "$d"

    probs=""
    TRAIN_GPT_FAULT=nan:0:2 trun "$S/nanmax.out" "${BASE[@]}" --steps 4 --nan-policy skip --max-skipped-steps 1
    e=$(errors "$S/nanmax.out")
    if [ "$rc" -ne 1 ] || [ "$(nerrors "$S/nanmax.out")" -ne 1 ] || echo "$e" | grep -q "unknown flag" || ! echo "$e" | grep -qiE "non-finite|in a row"; then
        probs="expected exit 1 and one error: line about non-finite steps; got $(seen "$S/nanmax.out" $rc)"
    fi
    check "--nan-policy skip --max-skipped-steps 1, one non-finite step is an error" "$probs"
}

# ----------------------------------------------------------------------------
# flags: absurd flags; each must give exit 1, exactly one error: line naming the flag, no output directory

test_flags() {
    local FB=(--model d2 --train "$SHARD" --threads 1 --steps 2)
    local i=0 c
    # NAME ; ERE the error: line must match ; flags ("OUT" stands for a fresh output directory)
    local -a cases=(
        "--total-batch-size 1e12 ; --total-batch-size ; --total-batch-size 1000000000000 --checkpoint-every 1 --out OUT"
        "--total-batch-size 2^32 with batch 1 x 1 (accumulation overflows int) ; --total-batch-size ; --batch-size 1 --seq-len 1 --total-batch-size 4294967296 --checkpoint-every 1 --out OUT"
        "--checkpoint-every without --out ; --checkpoint-every|--out ; --checkpoint-every 2"
        "--val without --val-every ; --val ; --val $SHARD --checkpoint-every 1 --out OUT"
        "--out unwritable (checked at start) ; --out ; --checkpoint-every 1 --out /proc/nonexistent/x"
        "a duplicate flag (--lr twice) ; --lr ; --lr 1e-3 --lr 2e-3 --checkpoint-every 1 --out OUT"
        "--nan-policy maybe (names the flag and the value) ; --nan-policy.*maybe|maybe.*--nan-policy ; --nan-policy maybe --checkpoint-every 1 --out OUT"
    )
    for c in "${cases[@]}"; do
        i=$((i + 1))
        local name="${c%% ; *}" rest="${c#* ; }"
        local re="${rest%% ; *}" args="${rest#* ; }"
        local out="$S/flags_out$i"
        local -a a
        read -r -a a <<< "${args//OUT/$out}"
        trun "$S/flags$i.out" "${FB[@]}" "${a[@]}"
        local e probs=""; e=$(errors "$S/flags$i.out")
        if [ "$rc" -ne 1 ] || [ "$(nerrors "$S/flags$i.out")" -ne 1 ]; then probs="expected exit 1 and one error: line; got $(seen "$S/flags$i.out" $rc)"
        elif ! echo "$e" | grep -qE -e "$re"; then probs="the error: line does not name the flag (/$re/): $e"
        elif grep -q '^step ' "$S/flags$i.out"; then probs="it trained before failing: $e"
        elif [ -e "$out" ]; then probs="the output directory $out was created"
        fi
        check "absurd flags, $name" "$probs"
        rm -rf "$out"
    done
}

# ----------------------------------------------------------------------------

T0=$(ms_now)
echo "# fault tests of $TRAIN in $S (groups: $GROUPS_RUN)"
setup_reference
for g in $GROUPS_RUN; do
    case "$g" in
        kill) test_kill ;; keep) test_keep ;; disk) test_disk ;; ulimit) test_ulimit ;;
        poison) test_poison ;; nan) test_nan ;; flags) test_flags ;;
        *) fail "unknown group '$g'" "groups are kill keep disk ulimit poison nan flags" ;;
    esac
done
echo "# fault tests took $(( ($(ms_now) - T0) / 1000 )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
