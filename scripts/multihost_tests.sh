#!/usr/bin/env bash
# scripts/multihost_tests.sh: training across "hosts" made of network namespaces (scripts/multihost.sh): MPI between
# hosts over TCP, within a host through shared memory. Each layout runs 10 steps of the PyTorch reference model
# (tests/ref/ref_model.bin) on a generated shard, B 2 x T 8, 1 thread per rank, and must give exactly the losses
# and gradient norms of the same ranks started on one host (the same reductions in the same order; only the
# transport differs), as printed strings:
#   dp across hosts     2 hosts x 1 rank, ZeRO 1
#   2 hosts x 2 ranks   ZeRO 1, ZeRO 2 and ZeRO 3 (the layer gathers cross hosts)
#   tp inside a host    --tp 2 (each tensor-parallel pair on one host, as the layout intends) x dp 2 across hosts
#   pp across hosts     --tp 2 --pp 2: stage 0 on host 0, stage 1 on host 1 (activations cross the network)
#   resume              a 2-host checkpoint (step 5) resumed by 4 ranks on one host: steps 6-10 equal the
#                       uninterrupted 2-host run's
#   no shared files     host 1 sees its own empty --out (scripts/multihost.sh --private): its ranks are named at
#                       start; a resume across both hosts sends them the checkpoint from rank 0 (bit for bit); a host
#                       with other training data stops the job, named
#   killed rank         rank 3 (on host 1) killed at step 4 ends the job within the timeout, mpirun naming it
#   hung / stopped      a rank on host 1 sleeping, or SIGSTOPped (its monitor thread stops too), is named at the
#                       collective timeout with its host and the collective: from its own host's records or through
#                       the monitor server of a live rank of that host (comm_remote.h); a host where every rank is
#                       stopped is named as not answering
# Skipped with the reason when hosts cannot be made here (scripts/multihost.sh exits 77: not root, no namespaces).
# Output: PASS/FAIL lines, then `N passed, M failed`. Run after `make train_gpt` (about 60 s):
#     bash scripts/multihost_tests.sh
set -u
cd "$(dirname "$0")/.." || exit 1
unset TRAIN_GPT_FAULT
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 LC_ALL=C
source scripts/test_lib.sh # defines: pass, fail, check, log_values, steps_of, same_steps, make_shard
passed=0
failed=0
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1)
export MULTIHOST_MPIRUN_ARGS="-x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1"

if [ ! -x ./train_gpt ] || ! command -v mpirun > /dev/null 2>&1; then
    echo "SKIP multihost tests: ./train_gpt not built or mpirun missing"
    echo "0 passed, 0 failed"
    exit 0
fi
S=$(mktemp -d "${TMPDIR:-/tmp}/multihost_tests.XXXXXX") || { echo "FAIL setup: no scratch directory"; echo "0 passed, 1 failed"; exit 1; }
trap 'rm -rf "$S"' EXIT
probe=$(bash scripts/multihost.sh --hosts 2 --per-host 1 --timeout 60 -- true 2>&1)
if [ $? -eq 77 ]; then
    echo "SKIP multihost tests: $probe"
    echo "0 passed, 0 failed"
    exit 0
fi
# the ranks land where the hostfile says: 2 per host, each host its own hostname
where=$(bash scripts/multihost.sh --hosts 2 --per-host 2 --timeout 60 -- hostname 2>&1 | sort | tr '\n' ' ')
check "placement: 2 hosts x 2 ranks run as host0, host0, host1, host1" "$([ "$where" = "host0 host0 host1 host1 " ] || echo "got '$where'")"
make_shard "$S/train.bin" 8000
BASE0=(--init tests/ref/ref_model.bin --train "$S/train.bin" --shuffle 1 --batch-size 2 --seq-len 8 --lr 1e-3 --warmup 2
       --weight-decay 0.1 --threads 1 --steps 10)
BASE=("${BASE0[@]}" --total-batch-size 64 --comm-timeout 30)

# same_run NAME HOSTS PER_HOST ARGS...: the layout across HOSTS hosts and on one host; losses and norms as strings
same_run() {
    local name="$1" hosts="$2" per="$3"; shift 3
    local np=$((hosts * per))
    timeout 120 "${MPIRUN[@]}" -np "$np" ./train_gpt "${BASE[@]}" "$@" --log "$S/$name.one.jsonl" > "$S/$name.one.txt" 2>&1
    local rc1=$?
    bash scripts/multihost.sh --hosts "$hosts" --per-host "$per" --timeout 120 -- ./train_gpt "${BASE[@]}" "$@" --log "$S/$name.mh.jsonl" > "$S/$name.mh.txt" 2>&1
    local rc2=$?
    local p=""
    [ $rc1 -eq 0 ] || p="one host: exit $rc1 ($(grep -m1 '^error' "$S/$name.one.txt"));"
    [ $rc2 -eq 0 ] || p="$p across hosts: exit $rc2 ($(grep -m1 '^error' "$S/$name.mh.txt"));"
    [ -n "$p" ] || p=$(same_steps "$S/$name.one.jsonl" "$S/$name.mh.jsonl" 0 10)
    check "$name: $hosts hosts x $per rank(s) ($*) give the losses and norms of $np ranks on one host, exactly" "$p"
}

same_run dp-across 2 1 --zero 1
same_run zero1 2 2 --zero 1
same_run zero2 2 2 --zero 2
same_run zero3 2 2 --zero 3
same_run tp-inside 2 2 --tp 2 --zero 1
same_run pp-across 2 2 --tp 2 --pp 2

# resume: the 2-host run writes a checkpoint at step 5; 4 ranks on one host continue it
bash scripts/multihost.sh --hosts 2 --per-host 2 --timeout 120 -- ./train_gpt "${BASE[@]}" --zero 1 --checkpoint-every 5 --out "$S/ck" \
    --log "$S/ck.jsonl" > "$S/ck.txt" 2>&1
rc=$?
p=""
if [ $rc -ne 0 ]; then p="2-host run: exit $rc"; else
    rm -f "$S/ck/model_00000010.bin" "$S/ck/state_00000010.bin" && echo 5 > "$S/ck/latest"
    timeout 120 "${MPIRUN[@]}" -np 4 ./train_gpt "${BASE[@]}" --zero 1 --resume "$S/ck" --log "$S/ck_resumed.jsonl" > "$S/ck_resumed.txt" 2>&1 ||
        p="resume on one host: exit $? ($(grep -m1 '^error' "$S/ck_resumed.txt"))"
    [ -n "$p" ] || p=$(same_steps "$S/ck.jsonl" "$S/ck_resumed.jsonl" 5 10)
fi
check "resume: a checkpoint written across 2 hosts (step 5) continues on one host as the uninterrupted run, bit for bit" "$p"

# a rank killed on the other host ends the job, named, within the timeout
t0=$(date +%s)
TRAIN_GPT_FAULT=die:3:4 MULTIHOST_MPIRUN_ARGS="$MULTIHOST_MPIRUN_ARGS -x TRAIN_GPT_FAULT" bash scripts/multihost.sh --hosts 2 --per-host 2 --timeout 90 -- \
    ./train_gpt "${BASE[@]}" --zero 1 > "$S/kill.txt" 2>&1
rc=$?
dt=$(( $(date +%s) - t0 ))
p=""
[ $rc -ne 0 ] && [ $rc -ne 124 ] || p="exit $rc (want non-zero, not the timeout's 124)"
grep -q "rank 3 with PID" "$S/kill.txt" || p="$p; no line naming rank 3: $(grep -m2 'rank\|error' "$S/kill.txt" | tr '\n' ' ' | cut -c1-200)"
check "killed: rank 3 on host 1 killed at step 4 ends the job in $dt s, named by mpirun" "${p#; }"

# no filesystem shared with host 1 (--private: host 1 sees an empty directory of its own): the run names the ranks
# that do not see --out, checkpoints land on host 0; resuming across both hosts, host 1's ranks receive the checkpoint
# from rank 0 and the run continues bit for bit; a host with other training data stops the job, named
bash scripts/multihost.sh --hosts 2 --per-host 2 --private "$S/pout" --timeout 120 -- ./train_gpt "${BASE[@]}" --zero 1 \
    --checkpoint-every 5 --out "$S/pout" --log "$S/pout.jsonl" > "$S/pout.txt" 2>&1
rc=$?
p=""
[ $rc -eq 0 ] || p="exit $rc;"
grep -q "note: --out $S/pout: rank(s) 2,3 (on host1) do not see rank 0's files there" "$S/pout.txt" || p="$p no note naming ranks 2,3 on host1;"
[ -f "$S/pout/model_00000010.bin" ] || p="$p no checkpoint on host 0;"
check "no shared filesystem: the ranks of host 1 that do not see --out are named; checkpoints are written on host 0" "$p"
p=""
rm -f "$S/pout/model_00000010.bin" "$S/pout/state_00000010.bin" && echo 5 > "$S/pout/latest"
bash scripts/multihost.sh --hosts 2 --per-host 2 --private "$S/pout" --timeout 120 -- ./train_gpt "${BASE[@]}" --zero 1 \
    --resume "$S/pout" --log "$S/pres.jsonl" > "$S/pres.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || p="exit $rc ($(grep -m1 '^error' "$S/pres.txt"));"
grep -q "resume: rank(s) 2,3 (on host1) do not see '$S/pout': they receive its checkpoint of step 5 from rank 0" "$S/pres.txt" || p="$p not said;"
[ -n "$p" ] || p=$(same_steps "$S/pout.jsonl" "$S/pres.jsonl" 5 10)
check "no shared filesystem: a resume across both hosts sends host 1 the checkpoint from rank 0; steps 6-10 equal the uninterrupted run" "$p"
mkdir -p "$S/pdata" && cp "$S/train.bin" "$S/pdata/train.bin" && make_shard "$S/other.bin" 6000
MULTIHOST_SETUP="cp '$S/other.bin' '$S/pdata/train.bin'" bash scripts/multihost.sh --hosts 2 --per-host 1 --private "$S/pdata" --timeout 120 -- \
    ./train_gpt "${BASE[@]/$S\/train.bin/$S/pdata/train.bin}" --zero 1 > "$S/pdata.txt" 2>&1
rc=$?
p=""
[ $rc -ne 0 ] && [ $rc -ne 124 ] || p="exit $rc (want an error);"
grep -q "rank 1 (on host1) sees other training data than rank 0" "$S/pdata.txt" || p="$p not named: $(grep -m1 error "$S/pdata.txt" | cut -c1-200)"
check "other data: a host whose training shards differ from rank 0's stops the job, named" "$p"

# a rank that hangs (sleeps in its main thread) or is stopped (SIGSTOP: all its threads, its monitor server too) on
# host 1: the rank that times out names it, its host and the collective. With 2 ranks per host a live rank of host 1
# answers for the stopped one; with 1 per host the rank on host 0 reads host 1's records over the network (a hung
# rank's server still answers), and a stopped host is reported as not answering. A rank whose process is gone while
# the job goes on (simulated: its record takes an exited child's pid) is reported dead by its host's server.
# fault per-host expected
cases=("hang:3:4 2 rank(s) 3 never arrived*rank 3 on host1 (pid *) is alive, outside communication for "
       "stop:2:4 2 rank(s) 2 never arrived*rank 2 on host1 (pid *) is alive, outside communication for "
       "hang:1:4 1 rank(s) 1 never arrived*rank 1 on host1 (pid *) is alive, outside communication for "
       "stop:1:4 1 not checked: rank 1 on host1: no rank of that host answers"
       "gone:1:4 1 rank(s) 1 never arrived*rank 1 on host1 (pid *) is dead")
for c in "${cases[@]}"; do
    fault="${c%% *}"; rest="${c#* }"; per="${rest%% *}"; want="${rest#* }"
    IFS=: read -r kind frank fstep <<< "$fault"
    t0=$(date +%s)
    TRAIN_GPT_FAULT=$fault MULTIHOST_MPIRUN_ARGS="$MULTIHOST_MPIRUN_ARGS -x TRAIN_GPT_FAULT" bash scripts/multihost.sh --hosts 2 --per-host "$per" \
        --timeout 90 -- ./train_gpt "${BASE0[@]}" --total-batch-size 64 --comm-timeout 8 --zero 1 > "$S/$kind$per.txt" 2>&1
    rc=$?
    dt=$(( $(date +%s) - t0 ))
    line=$(grep -m1 'did not complete within' "$S/$kind$per.txt")
    p=""
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || p="exit $rc (want non-zero, not the timeout's 124);"
    # shellcheck disable=SC2053 # (want is a glob pattern)
    [[ "$line" == *$want* ]] || p="$p want '$want'; got: ${line:0:400}"
    [[ "$line" == *" on group '"*"collective #"* ]] || p="$p the collective is not named;"
    what="hung (sleeping)"; [ "$kind" = stop ] && what="stopped (SIGSTOP)"; [ "$kind" = gone ] && what="gone (simulated)"
    check "$kind: rank $frank on host 1 ($per rank(s) per host) $what at step $((fstep + 1)): the timeout names it, its host and the collective ($dt s)" "$p"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
