#!/usr/bin/env bash
# scripts/test_build.sh: the build follows what it found. In a scratch copy of the working tree: build train_gpt
# and tokenize with BLAS hidden (NO_BLAS=1, as on a machine without OpenBLAS), then plainly (as after installing
# it), then again. Checks that the second build relinked train_gpt and its --version now names OpenBLAS, that
# tokenize (which does not use BLAS) was not rebuilt, and that the third build rebuilt nothing. Then checkpoints
# across the checksum change: version 3 (FNV, from a build without xxHash) resumes in the xxHash build. Then the
# CUDA trainer for sm_80, where nvcc is installed.
# Prints "PASS name" / "FAIL name: detail" lines and "N passed, M failed" last. Run by scripts/run_tests.sh.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0
check() { if [ "$1" -eq 0 ]; then echo "PASS $2"; passed=$((passed + 1)); else echo "FAIL $2: $3"; failed=$((failed + 1)); fi; }
if ! grep -q openblas <(make -s report 2>/dev/null); then
    echo "SKIP build test: OpenBLAS is not installed here"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d)
tmp80=$(mktemp -d)
trap 'rm -rf "$tmp" "$tmp80"' EXIT
# the sources only (works in a git checkout and in a plain copy such as the mutation script's); the build starts clean
tar -cf - --exclude=./.git --exclude=./fuzz --exclude=./data --exclude=./docs --exclude=./out --exclude=./build \
    --exclude=./tests/ref . | tar -xf - -C "$tmp"
(cd "$tmp" && make -s clean > /dev/null 2>&1)
export REPO_ROOT="$PWD"
# the CUDA trainer for the A100 (below) builds meanwhile, in a copy of its own (one nvcc process for a minute, while
# the builds here take the other core)
cuda80=0
if grep -q 'cuda' <(make -s report 2>/dev/null); then
    cuda80=1
    (cd "$tmp" && tar -cf - .) | tar -xf - -C "$tmp80"
    (cd "$tmp80" && make -s CUDA_ARCH=80 train_gpt_cu > build6.log 2>&1) &
    pid80=$!
fi
cd "$tmp" || exit 1
stamp() { stat -c '%y' "$1" 2>/dev/null; }
make -s NO_BLAS=1 train_gpt tokenize > build1.log 2>&1
v1=$(./train_gpt --version 2>&1 | tail -n 1)
check "$([[ "$v1" == *no-blas* ]]; echo $?)" "a build with BLAS hidden reports it: $v1" "$(tail -n 3 build1.log)"
t_train=$(stamp train_gpt); t_tok=$(stamp tokenize); sum1=$(md5sum < train_gpt)
make -s train_gpt tokenize > build2.log 2>&1
v2=$(./train_gpt --version 2>&1 | tail -n 1)
check "$([[ "$(md5sum < train_gpt)" != "$sum1" && "$(stamp train_gpt)" != "$t_train" ]]; echo $?)" \
    "with BLAS found again, train_gpt is relinked" "binary unchanged"
check "$([[ "$v2" == *openblas* ]]; echo $?)" "and its --version names OpenBLAS: $v2" "$v2"
check "$([[ "$(stamp tokenize)" == "$t_tok" ]]; echo $?)" "tokenize (no BLAS in it) is not rebuilt" "rebuilt"
t_train=$(stamp train_gpt)
make -s train_gpt tokenize > build3.log 2>&1
check "$([[ "$(stamp train_gpt)" == "$t_train" && "$(stamp tokenize)" == "$t_tok" ]]; echo $?)" \
    "an unchanged machine rebuilds nothing" "$(cat build3.log)"

# checkpoints across the checksum change: a build without xxHash writes state version 3 (FNV); the xxHash build
# resumes from it bit for bit, and the build without xxHash refuses a version-4 (XXH3) checkpoint by name
ROOT=$REPO_ROOT
perl -e 'print pack("l<256", 20240520, 1, 3000, (0) x 253), pack("S<*", map { ($_ * 37 + ($_ >> 3)) % 101 } 1 .. 3000)' > shard.bin
run_args=(--init "$ROOT/tests/ref/ref_model.bin" --train shard.bin --batch-size 2 --seq-len 8 --steps 4 --threads 1)
make -s NO_XXHASH=1 train_gpt > build4.log 2>&1 && cp train_gpt train_gpt_fnv
./train_gpt_fnv "${run_args[@]}" --checkpoint-every 2 --out ck3 --log a.jsonl > run_a.log 2>&1
make -s train_gpt > build5.log 2>&1
printf '2\n' > ck3/latest
./train_gpt "${run_args[@]}" --resume ck3 --log b.jsonl > run_b.log 2>&1
la=$(grep -o '"loss": [^,]*' a.jsonl | tail -n 2 | tr '\n' ' '); lb=$(grep -o '"loss": [^,]*' b.jsonl | tr '\n' ' ')
check "$([[ -n "$la" && "$la" == "$lb" ]]; echo $?)" "a version-3 (FNV) checkpoint resumes in the xxHash build bit for bit" \
    "steps 3-4: '$la' vs '$lb'; $(tail -n 2 run_b.log)"
./train_gpt "${run_args[@]}" --checkpoint-every 2 --out ck4 > run_c.log 2>&1
./train_gpt_fnv "${run_args[@]}" --resume ck4 > run_d.log 2>&1
check "$(grep -q 'uses XXH3 checksums, and this build has no xxHash' run_d.log; echo $?)" \
    "a build without xxHash refuses a version-4 checkpoint, saying why" "$(tail -n 2 run_d.log)"

# the CUDA trainer builds for the A100 too (CUDA_ARCH=80; the default is the H100/H200's 90), warnings as errors:
# compiled and linked here, where nvcc is installed, whether or not a GPU is
if [ $cuda80 = 1 ]; then
    wait $pid80
    v6=$("$tmp80/train_gpt_cu" --version 2>&1 | tail -n 1)
    check "$([[ "$v6" == *sm_80* ]]; echo $?)" "train_gpt_cu builds for sm_80 (CUDA_ARCH=80): $v6" "$(tail -n 3 "$tmp80/build6.log")"
else
    echo "SKIP the sm_80 build: no nvcc with cuBLASLt here"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
