#!/usr/bin/env bash
# scripts/gpu_check.sh: the one command that proves the CUDA backend on a GPU machine, from a bare checkout.
#
#   bash scripts/gpu_check.sh [--quick]        (about 5 minutes on one H200; --quick skips the large benchmarks)
#
# 1. finds nvcc and cuBLASLt (the toolkit's lib64, or a Python package's nvidia/cublas), builds train_gpt_cu,
#    test_gpt_cu (fp32 storage), test_gpt_cu_bf16 and the CPU train_gpt there (a binary built on another image may
#    not run on this one's libraries);
# 2. runs test_gpt_cu (every op against the double references, fp32 tolerances, outputs pre-filled with NaN where
#    the test says so; the committed PyTorch reference: logits, loss, every gradient, a 10-step trajectory) and
#    test_gpt_cu_bf16 (the ops in bf16: representable outputs within one rounding);
# 3. trains the same model on the same tokens for 10 steps with train_gpt_cu (bf16) and with the CPU trainer's
#    bf16 emulation (--dtype bf16), and compares the losses step by step;
# 4. measures the bandwidth-bound kernels against a device copy and the matmul rate (bench_kernels_cu), then
#    benchmarks GPT-2 124M and 350M at T = 1024 (the largest micro-batch of 64, 32, 16, 8 that fits) and 1558M with
#    --recompute 2: ms/step, tokens/s, MFU against the H200's dense bf16 peak (989 TFLOP/s), peak GPU memory.
# Each stage prints its result; the last lines are a table and "gpu_check: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
T0=$(date +%s)
passed=0; failed=0
ok()   { passed=$((passed + 1)); echo "PASS $*"; }
bad()  { failed=$((failed + 1)); echo "FAIL $*"; }
stage() { echo; echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 || { echo "gpu_check: no GPU here (nvidia-smi failed)"; exit 1; }
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || { echo "gpu_check: no nvcc on this machine"; exit 1; }
"$NVCC" --version | tail -n 2
# cuBLASLt: the toolkit's, else a pip wheel's (its library has only the versioned name: link through symlinks)
CUDA_HOME=${NVCC%/bin/nvcc}
LIBDIR=""; INC=""
if [ -e "$CUDA_HOME/lib64/libcublasLt.so" ]; then
    LIBDIR="$CUDA_HOME/lib64"
else
    PYLIB=$(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__))' 2>/dev/null || true)
    if [ -z "$PYLIB" ]; then
        PYLIB=$(find / -path /proc -prune -o -name 'libcublasLt.so*' -print 2>/dev/null | head -n 1 | xargs -r dirname | xargs -r dirname)
    fi
    LT=$(ls "$PYLIB"/lib/libcublasLt.so* 2>/dev/null | head -n 1)
    BL=$(ls "$PYLIB"/lib/libcublas.so* 2>/dev/null | head -n 1)
    [ -n "$LT" ] || { echo "gpu_check: cuBLASLt not found (toolkit lib64 or a Python package)"; exit 1; }
    LIBDIR=$(mktemp -d /tmp/gpu_check_libs.XXXX)
    ln -s "$LT" "$LIBDIR/libcublasLt.so"; ln -s "$BL" "$LIBDIR/libcublas.so"
    for f in "$PYLIB"/lib/*.so*; do ln -sf "$f" "$LIBDIR/$(basename "$f")"; done
    [ -d "$PYLIB/include" ] && INC="-I$PYLIB/include"
fi
echo "cuBLASLt: $LIBDIR $INC"
# find_lib LIB MODULE: where libLIB.so is, as "DIR [-IINCLUDE]": cuBLASLt's folder or the toolkit's lib64, else the
# Python package nvidia.MODULE's lib/ (whose libraries have only versioned names: linked through symlinks in a
# scratch folder, with the package's headers); nothing when neither has it.
find_lib() {
    local lib=$1 mod=$2 py dir f
    for dir in "$LIBDIR" "$CUDA_HOME/lib64"; do
        if [ -e "$dir/lib$lib.so" ]; then echo "$dir"; return; fi
    done
    py=$(python3 -c "import nvidia.$mod, os; print(os.path.dirname(nvidia.$mod.__file__))" 2>/dev/null || true)
    { [ -n "$py" ] && ls "$py"/lib/lib$lib.so* > /dev/null 2>&1; } || return 0
    dir=$(mktemp -d /tmp/gpu_check_$lib.XXXX)
    for f in "$py"/lib/*.so*; do ln -sf "$f" "$dir/$(basename "$f")"; done
    ln -sf "$(ls "$py"/lib/lib$lib.so* | head -n 1)" "$dir/lib$lib.so"
    echo "$dir -I$py/include"
}
# cuDNN (and the NVRTC its runtime-compiled engines need, below); NCCL (--comm nccl; pip: nvidia-nccl-cu13)
read -r CUDNN_DIR CUDNN_INC <<< "$(find_lib cudnn cudnn)"
read -r NCCL_DIR NCCL_INC <<< "$(find_lib nccl nccl)"
echo "NCCL: ${NCCL_DIR:-not found (--comm nccl not built)} $NCCL_INC"
NVRTC=$(python3 -c 'import nvidia.cuda_nvrtc, os; print(os.path.dirname(nvidia.cuda_nvrtc.__file__) + "/lib")' 2>/dev/null || true)
echo "cuDNN: ${CUDNN_DIR:-not found (native attention only)} $CUDNN_INC; NVRTC: ${NVRTC:-toolkit}"
export LD_LIBRARY_PATH="$LIBDIR:${CUDNN_DIR:+$CUDNN_DIR:}${NCCL_DIR:+$NCCL_DIR:}${NVRTC:+$NVRTC:}${LD_LIBRARY_PATH:-}"

stage "build"
JOBS=$(nproc 2>/dev/null || echo 4)
MK=(NVCC="$NVCC" CUDA_LIB_DIR="$LIBDIR" CUDA_INC="$INC")
[ -n "$CUDNN_DIR" ] && MK+=(CUDNN_LIB_DIR="$CUDNN_DIR" CUDNN_INC="$CUDNN_INC") || MK+=(NO_CUDNN=1)
[ -n "$NCCL_DIR" ] && MK+=(NCCL_LIB_DIR="$NCCL_DIR" NCCL_INC="$NCCL_INC") || MK+=(NO_NCCL=1)
TARGETS="train_gpt train_gpt_cu test_gpt_cu test_gpt_cu_bf16 bench_kernels_cu"
[ -n "$CUDNN_DIR" ] && TARGETS="$TARGETS tests/test_cudnn_graph"
if make -j"$JOBS" "${MK[@]}" $TARGETS > gpu_build.log 2>&1; then
    ok "build: $TARGETS"
else
    bad "build"; tail -n 40 gpu_build.log; echo "gpu_check: $passed passed, $failed failed"; exit 1
fi
grep -E '^make: (found|left out)' gpu_build.log | head -n 12

stage "op and reference tests, fp32 storage (test_gpt_cu)"
timeout 300 ./test_gpt_cu > gpu_test_fp32.log 2>&1; rc=$?
grep -E '^(PASS|FAIL|SKIP)' gpu_test_fp32.log | cut -c1-220
line=$(tail -n 1 gpu_test_fp32.log)
[ $rc -eq 0 ] && ok "test_gpt_cu: $line" || { bad "test_gpt_cu (exit $rc): $line"; tail -n 5 gpu_test_fp32.log; }

stage "op tests, bf16 storage (test_gpt_cu_bf16)"
timeout 120 ./test_gpt_cu_bf16 --only ops > gpu_test_bf16.log 2>&1; rc=$?
grep -E '^(PASS|FAIL|SKIP)' gpu_test_bf16.log | cut -c1-220
line=$(tail -n 1 gpu_test_bf16.log)
[ $rc -eq 0 ] && ok "test_gpt_cu_bf16: $line" || { bad "test_gpt_cu_bf16 (exit $rc): $line"; tail -n 5 gpu_test_bf16.log; }

if [ -x tests/test_cudnn_graph ]; then
    stage "cuDNN attention graphs (tests/test_cudnn_graph)"
    ./tests/test_cudnn_graph > gpu_cudnn_graph.log 2>&1 && ok "cudnn graphs: $(tail -n 1 gpu_cudnn_graph.log)" || { bad "cudnn graphs"; tail -n 5 gpu_cudnn_graph.log; }
fi

# follows A B TOL [decreasing]: the training losses of log A follow log B's, step for step, within TOL relative (and,
# with `decreasing`, A's last loss is below its first); prints both columns and the worst difference
follows() {
    python3 - "$@" <<'PY'
import json, sys
def losses(p): return [json.loads(l)["loss"] for l in open(p) if '"step"' in l and "val_loss" not in l]
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")
print("step  %-12s %s" % (sys.argv[1], sys.argv[2]))
for i, (x, y) in enumerate(zip(a, b)): print("%4d  %.6f  %.6f" % (i + 1, x, y))
print("max relative difference %.3g over %d steps (tolerance %g)" % (worst, len(a), tol))
sys.exit(0 if worst <= tol and (len(sys.argv) < 5 or a[-1] < a[0]) else 1)
PY
}

stage "whole model: train_gpt_cu (bf16) against the CPU's bf16 emulation, 10 steps"
# tokens: the bytes of tinyshakespeare as token ids (no tokenizer needed), 90% train
python3 - <<'PY'
import struct
text = open("data/tinyshakespeare.txt", "rb").read()
n = len(text) * 9 // 10
for name, part in (("gpu_check_train_000000.bin", text[:n]), ("gpu_check_val_000000.bin", text[n:])):
    with open("/tmp/" + name, "wb") as f:
        f.write(struct.pack("<3i", 20240520, 1, len(part)) + b"\0" * (1024 - 12))
        f.write(struct.pack("<%dH" % len(part), *part))
PY
common="--model d4 --train /tmp/gpu_check_train_000000.bin --batch-size 4 --seq-len 64 --steps 10 --lr 1e-3 --warmup 2 --seed 7"
timeout 120 ./train_gpt_cu $common --attention native --log /tmp/gpu_cu.jsonl > gpu_train_cu.log 2>&1; rc1=$?
# determinism: no float atomics anywhere, so a second identical run gives the same losses bit for bit
timeout 120 ./train_gpt_cu $common --attention native --log /tmp/gpu_cu2.jsonl > /dev/null 2>&1
if cmp -s <(grep -o '"loss": [^,]*' /tmp/gpu_cu.jsonl) <(grep -o '"loss": [^,]*' /tmp/gpu_cu2.jsonl) && [ -s /tmp/gpu_cu2.jsonl ]; then
    ok "determinism: two identical train_gpt_cu runs give the same losses bit for bit"
else
    bad "determinism: two identical train_gpt_cu runs differ"
fi
if [ -n "$CUDNN_DIR" ]; then # the two attention implementations on the same run
    timeout 120 ./train_gpt_cu $common --attention cudnn --log /tmp/gpu_cudnn.jsonl > gpu_train_cudnn.log 2>&1 || { bad "train_gpt_cu --attention cudnn"; tail -n 3 gpu_train_cudnn.log; }
fi
timeout 300 ./train_gpt $common --dtype bf16 --log /tmp/gpu_cpu.jsonl > gpu_train_cpu.log 2>&1; rc2=$?
if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ]; then
    bad "trajectory runs (train_gpt_cu exit $rc1, train_gpt exit $rc2)"; tail -n 3 gpu_train_cu.log gpu_train_cpu.log
else
    follows /tmp/gpu_cu.jsonl /tmp/gpu_cpu.jsonl 2e-2 decreasing && ok "trajectory: GPU bf16 follows the CPU's bf16 emulation (tolerance 2e-2 relative per step)" || bad "trajectory: GPU bf16 and CPU bf16 emulation differ"
    if [ -s /tmp/gpu_cudnn.jsonl ]; then
        follows /tmp/gpu_cudnn.jsonl /tmp/gpu_cu.jsonl 2e-2 && ok "trajectory: cuDNN attention follows the native kernels (2e-2 relative per step)" || bad "trajectory: cuDNN and native attention differ"
    fi
fi

stage "HellaSwag on the GPU: the reference model on tests/ref/hellaswag_ref.bin against PyTorch's float64 evaluation"
# the same answers as tests/ref/hellaswag_ref.txt (each example's best ending leads by at least 0.01 nats, so any
# other answer is a bug), each ending's summed loss within 1e-3 relative (fp32 storage; the matmuls may use TF32)
if timeout 120 ./train_gpt_cu --init tests/ref/ref_model.bin --eval-hellaswag tests/ref/hellaswag_ref.bin --hellaswag-details /tmp/gpu_hs.txt > gpu_hellaswag.log 2>&1; then
    python3 - tests/ref/hellaswag_ref.txt /tmp/gpu_hs.txt <<'PY' && ok "hellaswag: $(tail -n 1 gpu_hellaswag.log), the reference's answers" || bad "hellaswag: answers or losses differ from PyTorch's"
import sys
def rows(p):
    out = {}
    for l in open(p):
        if l[0].isdigit() and "|" in l:
            head, sums, _ = l.split("|")
            f = head.split()
            out[int(f[0])] = (f[3], f[4], [float(x) for x in sums.split()])
    return out
ref, got = rows(sys.argv[1]), rows(sys.argv[2])
worst = max((abs(g - r) / abs(r) for k in ref for g, r in zip(got.get(k, ("", "", []))[2], ref[k][2])), default=1.0)
same = len(ref) == len(got) and all(got[k][:2] == ref[k][:2] for k in ref)
print("hellaswag: %d examples, answers %s, worst relative loss difference %.3g (tolerance 1e-3)" % (len(got), "equal" if same else "DIFFER", worst))
sys.exit(0 if same and worst <= 1e-3 else 1)
PY
else
    bad "hellaswag: train_gpt_cu --eval-hellaswag failed"; tail -n 3 gpu_hellaswag.log
fi

if command -v mpirun > /dev/null 2>&1 && ./train_gpt_cu --version 2>&1 | grep -q mpi; then
    stage "2 processes sharing the GPU (MPI through pinned host memory), ZeRO 0/1/2/3, pipeline and tensor parallel, against one process"
    MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
    common2="--model d4 --train /tmp/gpu_check_train_000000.bin --batch-size 4 --seq-len 64 --total-batch-size 512 --steps 8 --lr 1e-3 --seed 7"
    timeout 120 ./train_gpt_cu $common2 --log /tmp/gpu_dp1.jsonl > gpu_dp1.log 2>&1
    for z in 0 1 2 3; do
        timeout 180 $MPIRUN ./train_gpt_cu $common2 --zero $z --log /tmp/gpu_dp2_z$z.jsonl > gpu_dp2_z$z.log 2>&1 || { bad "2 processes --zero $z"; tail -n 3 gpu_dp2_z$z.log; continue; }
        follows /tmp/gpu_dp1.jsonl /tmp/gpu_dp2_z$z.jsonl 1e-2 && ok "2 processes --zero $z follow one process (1e-2 relative)" || bad "2 processes --zero $z differ from one process"
    done
    # pipeline parallel on one GPU: two stages in two processes, activations and gradients between them through MPI
    for sched in 1f1b interleaved; do
        extra="--pp 2 --pp-schedule $sched"; [ $sched = interleaved ] && extra="$extra --virtual-stages 2"
        timeout 180 $MPIRUN ./train_gpt_cu $common2 $extra --log /tmp/gpu_pp2_$sched.jsonl > gpu_pp2_$sched.log 2>&1 || { bad "--pp 2 --pp-schedule $sched"; tail -n 3 gpu_pp2_$sched.log; continue; }
        follows /tmp/gpu_dp1.jsonl /tmp/gpu_pp2_$sched.jsonl 1e-2 && ok "--pp 2 --pp-schedule $sched (2 processes) follows one process (1e-2 relative)" || bad "--pp 2 $sched differs from one process"
    done
    # tensor parallel on one GPU: the two halves of every layer in two processes, their collectives through MPI
    for sp in 0 1; do
        timeout 180 $MPIRUN ./train_gpt_cu $common2 --tp 2 --sequence-parallel $sp --log /tmp/gpu_tp2_sp$sp.jsonl > gpu_tp2_sp$sp.log 2>&1 || { bad "--tp 2 --sequence-parallel $sp"; tail -n 3 gpu_tp2_sp$sp.log; continue; }
        follows /tmp/gpu_dp1.jsonl /tmp/gpu_tp2_sp$sp.jsonl 1e-2 && ok "--tp 2 --sequence-parallel $sp (2 processes) follows one process (1e-2 relative)" || bad "--tp 2 --sequence-parallel $sp differs from one process"
    done
    # NCCL on the device buffers: one GPU allows a communicator of one rank only (NCCL refuses two ranks on one GPU),
    # which still runs every call of the path (grouped reduces, broadcasts, the in-place all-gather, the stream and
    # event ordering); a sum over one rank is a copy, so the losses must equal --comm mpi's bit for bit
    if ./train_gpt_cu --version 2>&1 | grep -q nccl; then
        for z in 1 2 3; do
            timeout 120 ./train_gpt_cu $common2 --zero $z --comm mpi --log /tmp/gpu_mpi_z$z.jsonl > /dev/null 2>&1
            timeout 120 ./train_gpt_cu $common2 --zero $z --comm nccl --log /tmp/gpu_nccl_z$z.jsonl > gpu_nccl_z$z.log 2>&1 || { bad "--comm nccl --zero $z"; tail -n 3 gpu_nccl_z$z.log; continue; }
            follows /tmp/gpu_nccl_z$z.jsonl /tmp/gpu_mpi_z$z.jsonl 0 && ok "--comm nccl --zero $z (one rank) equals --comm mpi bit for bit" || bad "--comm nccl --zero $z differs from --comm mpi"
        done
    else
        echo "(train_gpt_cu built without NCCL here: --comm nccl is skipped)"
    fi
else
    echo "(no mpirun, or train_gpt_cu built without MPI here: the multi-process check is skipped)"
fi

stage "bandwidth of the element-wise kernels against a device copy; cuBLASLt's matmul rate (bench_kernels_cu)"
timeout 120 ./bench_kernels_cu > gpu_bench_kernels.txt 2>&1 && { cat gpu_bench_kernels.txt; ok "bench_kernels_cu"; } || { bad "bench_kernels_cu"; tail -n 5 gpu_bench_kernels.txt; }

stage "benchmarks"
PEAK=989e12
bench() { # name model extra...
    local name=$1 model=$2; shift 2
    local sizes="64 32 16 8 4"
    [ -n "$CUDNN_DIR" ] || sizes="8 4" # the native attention kernels are O(T^2) per head and slow: small batches only
    for B in $sizes; do
        if [ $(( $(date +%s) - T0 )) -gt 420 ]; then echo "  $name: skipped (the check is past 7 minutes)"; return 0; fi
        out=$(timeout 240 ./train_gpt_cu --bench 1 --bench-steps 3 --model "$model" --batch-size $B --seq-len 1024 "$@" 2>&1); rc=$?
        if [ $rc -eq 0 ]; then
            ms=$(echo "$out" | grep -o 'bench: [0-9.]* ms/step' | grep -o '[0-9.]*' | head -n 1)
            tps=$(echo "$out" | grep -o '| [0-9]* tokens/s' | grep -o '[0-9]*' | head -n 1)
            gf=$(echo "$out" | grep -o '[0-9.]* GFLOP/s' | tail -n 1 | grep -o '[0-9.]*')
            mfu=$(awk -v g="$gf" -v p=$PEAK 'BEGIN { printf "%.1f%%", g * 1e9 / p * 100 }')
            printf "%-28s | B %-3s | %9s ms/step | %9s tokens/s | MFU %6s | %s\n" "$name" "$B" "$ms" "$tps" "$mfu" "$(echo "$out" | grep -o 'GPU memory in use [0-9.]* GB' | head -n 1)" | tee -a gpu_bench.txt
            return 0
        fi
        echo "  $name B $B: $(echo "$out" | grep -m1 -i 'error' | cut -c1-160)"
    done
    bad "benchmark $name: no micro-batch ran"
}
: > gpu_bench.txt
bench "GPT-2 124M bf16" gpt2-124M
if [ $QUICK = 0 ]; then
    bench "GPT-2 350M bf16" gpt2-350M
    bench "GPT-2 1558M bf16 recompute 2" gpt2-1558M --recompute 2
fi
[ -s gpu_bench.txt ] && ok "benchmarks ran ($(wc -l < gpu_bench.txt) rows)"

stage "summary ($(( $(date +%s) - T0 )) s, commit $(git describe --always --dirty 2>/dev/null))"
grep -E '^(FAIL)' gpu_test_fp32.log gpu_test_bf16.log 2>/dev/null | head -n 20
cat gpu_bench_kernels.txt gpu_bench.txt 2>/dev/null
echo "gpu_check: $passed passed, $failed failed"
[ $failed -eq 0 ]
