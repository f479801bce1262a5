#!/usr/bin/env bash
# scripts/test_build.sh: the build follows what it found. In a scratch copy of the working tree: build train_gpt
# and tokenize with BLAS hidden (NO_BLAS=1, as on a machine without OpenBLAS), then plainly (as after installing
# it), then again. Checks that the second build relinked train_gpt and its --version now names OpenBLAS, that
# tokenize (which does not use BLAS) was not rebuilt, and that the third build rebuilt nothing.
# Prints "PASS name" / "FAIL name: detail" lines and "N passed, M failed" last. Run by scripts/run_tests.sh.
set -u
cd "$(dirname "$0")/.."
passed=0; failed=0
check() { if [ "$1" -eq 0 ]; then echo "PASS $2"; passed=$((passed + 1)); else echo "FAIL $2: $3"; failed=$((failed + 1)); fi; }
if ! grep -q openblas <(make -s report 2>/dev/null); then
    echo "SKIP build test: OpenBLAS is not installed here"; echo "0 passed, 0 failed"; exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git ls-files -co --exclude-standard -z | grep -zv '^fuzz/\|^tests/ref/\|^data/\|^docs/' | xargs -0 cp --parents -t "$tmp" 2>/dev/null
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
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
