#!/usr/bin/env bash
# scripts/run_tests.sh: runs every test binary (single process and multi-rank under mpirun) and prints the total.
# Each binary prints "N passed, M failed" last; this script adds them up and prints the same line last.
# Run from the repository root after `make` (`make test` does both).
set -u
cd "$(dirname "$0")/.."
export GPT2_VOCAB_DIR="${GPT2_VOCAB_DIR:-data/gpt2}"
# tests must not inherit a fault injection from the caller's shell
unset TRAIN_GPT_FAULT
# Open MPI settings for the tests' hundreds of short jobs (a value the caller set wins; training runs set nothing):
# - the ob1 PML, which Debian's configuration ends up with anyway, named so that the ranks of each job reach it at
#   once instead of first probing the cm PML's transports: 0.7 to 0.45 s per 2-rank mpirun here (a single process
#   sets it itself, comm.h);
# - no grace period when mpirun ends a job that failed: it sends SIGCONT, waits 1 s, SIGTERM, waits 1 s, SIGKILL,
#   even when every process has already exited, so every test that expects a refusal or a failure waited 2 s.
# tests/testing.h passes them on to the commands the C test binaries run (it drops every other OMPI_ variable).
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}" OMPI_MCA_odls_base_sigkill_timeout="${OMPI_MCA_odls_base_sigkill_timeout:-0}"
passed=0
failed=0
MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1"

# Wall time per test command, for the table of the slowest at the end (where CI's minutes go; not a test)
times=()
took() { times+=("$1 $2"); echo "--- $2: $1 s"; }

# run NAME CMD...: runs a test command, echoes its output, adds its closing "N passed, M failed" line
run() {
    local name="$1"; shift
    echo "=== $name: $*"
    local out rc t0=$SECONDS
    out=$("$@" 2>&1)
    rc=$?
    echo "$out"
    took $((SECONDS - t0)) "$name"
    local last
    last=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
    if [ -z "$last" ]; then
        echo "FAIL $name: no summary line (exit $rc)"
        failed=$((failed + 1))
        return
    fi
    local p f
    p=$(echo "$last" | awk '{print $1}')
    f=$(echo "$last" | awk '{print $3}')
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exit status $rc with no failed check"
        failed=$((failed + 1))
    fi
}

# expect_fail NAME PATTERN CMD...: the command must exit non-zero and print PATTERN (failure-path tests)
expect_fail() {
    local name="$1" pattern="$2"; shift 2
    echo "=== $name: $*"
    local out rc t0=$SECONDS
    out=$("$@" 2>&1)
    rc=$?
    took $((SECONDS - t0)) "$name"
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo "$out" | grep -qE "$pattern"; then
        echo "PASS $name (exit $rc)"
        passed=$((passed + 1))
    else
        echo "$out" | tail -n 20
        echo "FAIL $name: exit $rc, expected non-zero and /$pattern/"
        failed=$((failed + 1))
    fi
}

run test_gpt ./test_gpt
if [ -x tests/test_hf ]; then
    run test_hf ./tests/test_hf
else
    echo "SKIP test_hf: not built (needs libcjson-dev)"
fi

# OpenBLAS kernel families: the trainer never runs on a generic family when the CPU allows a better one, and the
# numerical tests pass under every family this CPU can run (OpenBLAS's own choice, forced ones, the generic one)
if grep -q openblas <(ldd ./test_gpt 2>/dev/null); then
    flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
    has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
    line=$(env -u OPENBLAS_CORETYPE ./test_gpt --only none 2>&1 | grep -m1 '^matmuls:')
    family=$(echo "$line" | awk '{print $2}')
    echo "=== OpenBLAS kernel choice: $line"
    if has avx2 fma && [[ "$family" =~ ^(Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Katmai)$ ]]; then
        echo "FAIL OpenBLAS kernel choice: generic '$family' on a CPU with AVX2/FMA"; failed=$((failed + 1))
    else
        echo "PASS OpenBLAS kernel choice: $family"; passed=$((passed + 1))
    fi
    cores=(Prescott)
    has avx2 fma && cores+=(Haswell)
    has avx512f avx512bw avx512vl avx512dq && cores+=(SkylakeX)
    has avx512f avx512bw avx512vl avx512dq avx512_bf16 && cores+=(Cooperlake)
    for core in "${cores[@]}"; do
        run "test_gpt under OPENBLAS_CORETYPE=$core" env OPENBLAS_CORETYPE="$core" ./test_gpt --only reference
    done
fi
run test_runs ./tests/test_runs
run test_tp_runs ./tests/test_tp_runs
run test_pp_runs ./tests/test_pp_runs
# the multiple-choice evaluation (HellaSwag): format, converter, known answers, PyTorch reference, ranks, training
run test_hellaswag ./tests/test_hellaswag
[ -x tests/test_dataloader ] && run test_dataloader ./tests/test_dataloader
run test_precision ./tests/test_precision
run test_pp ./tests/test_pp
# the cuDNN attention graphs finalize without a GPU (built wherever nvcc and cuDNN are)
if [ -x tests/test_cudnn_graph ]; then run test_cudnn_graph ./tests/test_cudnn_graph; fi
# the CUDA backend on the CPU (tests/cuda_emu): the emulator's own test, then the GPU check's correctness stages
# (op tests in fp32 and bf16, the reference, trajectories, HellaSwag, 2 processes with ZeRO/pp/tp, --comm nccl)
if [ -x tests/test_cuda_emu ]; then run test_cuda_emu ./tests/test_cuda_emu; fi
if [ -x train_gpt_emu ] && [ -x test_gpt_emu ]; then run "gpu_check --emu" bash scripts/gpu_check.sh --emu; fi
# on a machine without a GPU the CUDA binaries end with one clear line, not a crash (scripts/gpu_check.sh runs them
# where a GPU is)
if [ -x train_gpt_cu ] && ! nvidia-smi > /dev/null 2>&1; then
    expect_fail "train_gpt_cu without a GPU says so" "no usable CUDA device" ./train_gpt_cu --bench 1 --model d2
    expect_fail "test_gpt_cu without a GPU says so" "no usable CUDA device" ./test_gpt_cu --only ops
fi
expect_fail "train_gpt --comm nccl is refused on the CPU" "GPU builds only" ./train_gpt --comm nccl --model d2 --steps 1
expect_fail "nccl_rank_host.sh outside mpirun says so" "no MPI rank in the environment" \
    env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK bash scripts/nccl_rank_host.sh true
if [ -x tests/test_tokenizer ]; then
    run test_tokenizer ./tests/test_tokenizer
else
    echo "SKIP test_tokenizer: not built (needs libpcre2-dev)"
fi
if [ -x tests/test_comm ] && command -v mpirun >/dev/null 2>&1; then
    run "test_comm (no mpirun)" ./tests/test_comm
    for np in 1 2 3 4; do
        run "test_comm -np $np" $MPIRUN -np $np ./tests/test_comm
    done
    # PowerSGD's compressor against its double-precision reference, in groups of 1 to 4 ranks
    for np in 1 2 3 4; do
        [ -x tests/test_powersgd ] && run "test_powersgd -np $np" $MPIRUN -np $np ./tests/test_powersgd
    done
    # the tensor-parallel building blocks against the single-rank ops, in groups of 1, 2 and 4 ranks
    for np in 1 2 4; do
        [ -x tests/test_tp ] && run "test_tp -np $np" $MPIRUN -np $np ./tests/test_tp
    done
    expect_fail "test_comm: a hung rank is named at the timeout" "rank\(s\) 1 never arrived" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --hang-test --timeout 3
    expect_fail "test_comm: ranks that disagree on the next collective: the timeout says what the other waits in" \
        "is alive, waiting in (recv|allreduce) #[0-9]+ on group 'world'" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --mismatch-test --timeout 3
    expect_fail "test_comm: a rank whose process is gone (simulated) is named dead at the timeout" \
        "rank 1 on [^ ]+ \(pid [0-9]+\) is dead" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --dead-test --timeout 3
    expect_fail "test_comm: a rank that started the collective and stopped calling into MPI: every rank arrived, yet it is stuck" \
        "all-?reduce on group 'world' .* did not complete within 3 s; every rank arrived, yet the operation is stuck .*: rank 1 on [^ ]+ \(pid [0-9]+\) is alive" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --stuck-test --timeout 3
    expect_fail "test_comm: a message shorter than its receive is an error naming both sizes" \
        "recv from rank 1 on group 'world' \(tag 5\): expected 200 bytes, the sender sent a different size \(chunk 0 holds 100 bytes" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --short-message-test
    expect_fail "test_comm: a killed rank ends the job, named by mpirun" "rank 1" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --kill-test
    expect_fail "test_comm: a rank that exits ends the job" "simulated failure on rank 1" \
        timeout 120 $MPIRUN -np 2 ./tests/test_comm --exit-test
    for m in "tag|send on group 'world': tag 32767 is outside \[0, 32766\] \(32767 is the collectives'\)" \
             "peer|recv on group 'world': peer 1 is not a rank of the group \(size 1\)" \
             "root|broadcast on group 'world': root 1 is not a rank of the group \(size 1\)" \
             "overlap|alltoall on group 'world': the send and receive buffers overlap" \
             "null|allreduce on group 'world': buf is NULL with 4 elements"; do
        expect_fail "test_comm: a call with a bad argument (${m%%|*}) is refused, naming it" "${m#*|}" \
            timeout 60 ./tests/test_comm --misuse-test "${m%%|*}"
    done
    expect_fail "test_comm: a layout that does not divide the world is refused" "is not divisible by tp\*pp" \
        timeout 120 $MPIRUN -np 3 ./tests/test_comm --layout-error-test
else
    echo "SKIP test_comm: MPI not available"
fi
run fault_tests bash scripts/fault_tests.sh
# the kill trials once more in bf16: master weights, stochastic rounding and their state survive a kill -9 too
run "fault_tests kill (bf16)" env FAULT_EXTRA_ARGS="--dtype bf16" FAULT_SEED=77 bash scripts/fault_tests.sh kill
# the elastic supervisor: a killed or hung rank, restarts on the ranks that remain, giving up with a summary
run elastic_tests bash scripts/elastic_tests.sh
# several hosts made of network namespaces (skipped where they cannot be made): dp, ZeRO 1-3, tp inside a host, pp
# across hosts, resume on one host, a killed rank on the other host
run multihost_tests bash scripts/multihost_tests.sh
run test_build bash scripts/test_build.sh
# data preparation offline: parquet_text on the committed parquet files (and malformed ones, under ASan), then
# prepare_fineweb.sh / prepare_tinystories.sh on the stand-ins in tests/data (shards, atomicity, bad settings)
run data_tests bash scripts/data_tests.sh
# every reproduction script (scripts/run_gpt2_*.sh, run_gpt3_*.sh) through its dry run: 2 steps scaled down on the CPU,
# the plan for the real size, resume, tp/pp layouts, refusals
run run_scripts_tests bash scripts/run_scripts_tests.sh
if [ -f scripts/test_scripts.sh ]; then
    run test_scripts bash scripts/test_scripts.sh
fi
echo "=== the slowest test commands (wall seconds; $SECONDS in all)"
printf '%s\n' "${times[@]}" | sort -rn | head -n 12 | awk '{ s = $1; $1 = ""; printf "%6d s %s\n", s, $0 }'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
