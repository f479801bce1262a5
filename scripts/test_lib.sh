# scripts/test_lib.sh: helpers the shell test scripts share (scripts/elastic_tests.sh, scripts/multihost_tests.sh).
# Source it after setting passed=0 failed=0; it defines:
#   pass NAME / fail NAME DETAIL / check NAME PROBLEMS   a PASS or FAIL line, counted ("" problems = pass)
#   log_values LOG                                       "step loss grad_norm" per training step of a JSONL log
#   steps_of LOG, same_steps REF LOG FROM TO             the steps a log holds; steps FROM+1..TO equal, as strings
#   make_shard FILE N                                    an llm.c shard of N tokens below 101 (the reference model's V)

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
check() { if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi; }   # check NAME PROBLEMS ("" = pass)

log_values() {
    awk 'function f(k,  m) { if (match($0, "\"" k "\": *[^,}]*")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", m); return m } return "?" }
         /"loss"/ { print f("step"), f("loss"), f("grad_norm") }' "$1" 2>/dev/null
}

# steps_of LOG: the training steps a log holds, space-separated
steps_of() { log_values "$1" | awk '{ printf "%s%s", (NR > 1 ? " " : ""), $1 }'; }
# same_steps REF LOG FROM TO: LOG's steps FROM+1..TO equal REF's, as printed strings; prints the problem
same_steps() {
    local want got d
    want=$(log_values "$1" | awk -v a="$3" -v b="$4" '$1 > a && $1 <= b')
    got=$(log_values "$2" | awk -v a="$3" -v b="$4" '$1 > a && $1 <= b')
    [ -n "$want" ] || { echo "no steps $(($3 + 1))-$4 in $1"; return; }
    [ "$want" = "$got" ] && return
    d=$(diff <(echo "$want") <(echo "$got") | grep '^[<>]' | head -n 2 | tr '\n' ' ')
    echo "steps $(($3 + 1))-$4 differ (< $(basename "$1"), > $(basename "$2")): ${d% }"
}

# make_shard FILE N: a shard of N tokens below 101 (the reference model's vocabulary): llm.c's 256 x int32 header, uint16 tokens
le32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255)); }
make_shard() {
    {
        printf '%b' "$(le32 20240520)$(le32 1)$(le32 "$2")"
        head -c 1012 /dev/zero
        awk -v n="$2" 'BEGIN { srand(11); for (i = 0; i < n; i++) { t = i % 7 == 0 ? 0 : int(rand() * 101); printf "%c%c", t, 0 } }'
    } > "$1"
}
