#!/usr/bin/env bash
# scripts/mutate.sh: mutation testing. Applies each one-line mutant of tests/mutants.txt to a scratch copy of the
# working tree, builds it, runs the test suite there, and reports whether the suite caught (killed) the bug.
# The real working tree is only read, so this is safe while others edit it.
#
#   scripts/mutate.sh                     every mutant, full suite (bash scripts/run_tests.sh); `make mutate`
#   scripts/mutate.sh warmup 'adamw-.*'   only mutants whose name matches one of these extended regexes
#   MUTANTS='warmup clip' scripts/mutate.sh               the same filter through the environment
#   MUTATE_TEST_CMD='./test_gpt --only parallel' scripts/mutate.sh zero-   a faster, narrower test command
#   scripts/mutate.sh --check             every mutant's text occurs exactly once (no build, no tests; seconds)
#   scripts/mutate.sh --check --build     ... and every mutant compiles
#   scripts/mutate.sh --list              names (and which are marked equivalent)
#
# Per mutant one line: KILLED / SURVIVED / INVALID (does not compile) / STALE (its text does not occur exactly
# once) / EQUIV (marked equivalent, skipped), the name, seconds, and for a kill the first failing check. Then the
# score, killed/(killed+survived), and the survivors last. Exit status: 0 when every mutant run was killed and
# none is stale or invalid; 1 otherwise; 2 for a usage error, a malformed list, or an unmutated baseline that
# does not build or pass.
#
# Environment:
#   MUTATE_TEST_CMD     test command run in the copy's root (default: bash scripts/run_tests.sh). A mutant is
#                       killed when it exits non-zero, prints a line starting with FAIL or an "N passed, M
#                       failed" line with M > 0, or times out.
#   MUTATE_TIMEOUT      seconds per mutant's test run (default 600); a timeout counts as a kill
#   MUTATE_BASELINE     1 (default): first run the tests on the unmutated copy and stop if they fail; 0: skip
#   MUTATE_EQUIVALENT   1: also run mutants marked `equivalent:` (a kill then means the mark is wrong)
#   MUTATE_LIST         the mutant list (default tests/mutants.txt)
#   MUTATE_TMPDIR       where scratch copies go (default /var/tmp, else $TMPDIR); removed at the end
#   MUTATE_KEEP         1: keep the scratch directory (its path is printed)
#   MUTATE_LOG_DIR      if set, each mutant's build and test output is saved there as NAME.log
#   MUTATE_JOBS         make -j for builds (default 2)
#   MUTATE_TARGETS      the make targets built in each copy (default: all); with a narrow MUTATE_TEST_CMD, only
#                       the binaries it runs (say 'tests/test_tokenizer tokenize'): minutes less per mutant
#
# Isolation: when the caller may create mount and PID namespaces (root, or unprivileged user namespaces), each
# test run gets a private /tmp (the suites' scratch directories have names of their own, but whatever a mutant
# writes to /tmp goes away with it) and its own PID namespace, so a timeout ends every process the run started
# (mpirun's daemons included). A TMPDIR under /tmp, which the private /tmp does not hold, becomes /tmp there (else
# every suite would fail to make its scratch directory, and every mutant would count as killed). Otherwise the tests
# run directly, with a warning.
set -u
cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd -P)

LIST=${MUTATE_LIST:-tests/mutants.txt}
TEST_CMD=${MUTATE_TEST_CMD:-bash scripts/run_tests.sh}
TIMEOUT=${MUTATE_TIMEOUT:-600}
BASELINE=${MUTATE_BASELINE:-1}
RUN_EQUIV=${MUTATE_EQUIVALENT:-0}
JOBS=${MUTATE_JOBS:-2}

usage() { sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

mode=run
build_check=0
filters=()
while [ $# -gt 0 ]; do
    case "$1" in
        --check) mode=check ;;
        --build) build_check=1 ;;
        --list) mode=list ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "mutate: unknown option '$1' (see --help)" >&2; exit 2 ;;
        *) filters+=("$1") ;;
    esac
    shift
done
if [ -n "${MUTANTS:-}" ]; then
    for f in ${MUTANTS//,/ }; do filters+=("$f"); done
fi
if [ "$build_check" = 1 ] && [ "$mode" != check ]; then echo "mutate: --build goes with --check" >&2; exit 2; fi
[ -f "$LIST" ] || { echo "mutate: no mutant list '$LIST'" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------------------------
# The list parser and the applier, in Perl (literal string search; no escaping of the code).
#   parse LIST            prints one line per mutant: name US file US equivalent(0/1) US reason (US = \x1f)
#   apply LIST NAME DIR [--dry]   applies the mutant to DIR/file; exit 3 with a reason if its text does not occur
#                         exactly once (or the file is missing); --dry only checks
# shellcheck disable=SC2016 # Perl source: its $ are Perl's
MUTANT_TOOL='
use strict; use warnings;
sub fail { print STDERR "mutate: $_[0]\n"; exit 2; }
sub parse {
    my ($path) = @_;
    open(my $fh, "<", $path) or fail("cannot read $path: $!");
    my (@recs, $cur, $last);
    my %known = map { $_ => 1 } qw(name file find replace bug equivalent);
    my $ln = 0;
    my $close = sub {
        return unless $cur;
        for my $k (qw(name file find replace bug)) {
            fail("$path:$cur->{line}: mutant record lacks \"$k:\"") unless defined $cur->{$k};
        }
        fail("$path:$cur->{line}: find text is empty") if $cur->{find} eq "";
        fail("$path:$cur->{line}: find and replace are the same") if $cur->{find} eq $cur->{replace};
        fail("$path:$cur->{line}: name \"$cur->{name}\" has characters outside [A-Za-z0-9._-]") unless $cur->{name} =~ /^[A-Za-z0-9._-]+$/;
        push @recs, $cur; $cur = undef; $last = undef;
    };
    while (my $l = <$fh>) {
        $ln++;
        chomp $l; $l =~ s/\r$//;
        next if $l =~ /^#/;
        if ($l =~ /^\s*$/) { $close->(); next; }
        if ($l =~ /^\s/) {
            fail("$path:$ln: continuation line outside a bug/equivalent field") unless $cur && $last && ($last eq "bug" || $last eq "equivalent");
            (my $t = $l) =~ s/^\s+//; $t =~ s/\s+$//;
            $cur->{$last} .= " $t";
            next;
        }
        $l =~ /^([a-z]+):(.*)$/ or fail("$path:$ln: expected \"key: value\"");
        my ($k, $v) = ($1, $2);
        fail("$path:$ln: unknown key \"$k\"") unless $known{$k};
        $v =~ s/^ //; $v =~ s/\s+$//;
        $cur ||= { line => $ln };
        fail("$path:$ln: \"$k:\" given twice in one record") if defined $cur->{$k};
        $cur->{$k} = $v; $last = $k;
    }
    $close->();
    my %seen;
    for my $r (@recs) { fail("$path:$r->{line}: duplicate mutant name \"$r->{name}\"") if $seen{$r->{name}}++; }
    return @recs;
}
my $cmd = shift @ARGV;
if ($cmd eq "parse") {
    for my $r (parse($ARGV[0])) {
        my $eq = defined $r->{equivalent} ? 1 : 0;
        print join("\x1f", $r->{name}, $r->{file}, $eq, $eq ? $r->{equivalent} : ""), "\n";
    }
    exit 0;
}
if ($cmd eq "apply") {
    my ($list, $name, $dir, $dry) = @ARGV;
    my ($r) = grep { $_->{name} eq $name } parse($list);
    fail("no mutant \"$name\"") unless $r;
    my $f = "$dir/$r->{file}";
    if (!-f $f) { print "file $r->{file} does not exist\n"; exit 3; }
    open(my $in, "<", $f) or fail("cannot read $f: $!");
    local $/; my $text = <$in>; close $in;
    my ($n, $pos, $at) = (0, 0, -1);
    while ((my $i = index($text, $r->{find}, $pos)) >= 0) { $n++; $at = $i if $at < 0; $pos = $i + 1; }
    if ($n != 1) { print "find text occurs $n times in $r->{file}, not once\n"; exit 3; }
    exit 0 if defined $dry && $dry eq "--dry";
    substr($text, $at, length($r->{find})) = $r->{replace};
    open(my $out, ">", $f) or fail("cannot write $f: $!");
    print $out $text; close $out or fail("cannot write $f: $!");
    my $line = 1 + (substr($text, 0, $at) =~ tr/\n//);
    print "$r->{file}:$line\n";
    exit 0;
}
fail("internal: unknown tool command \"$cmd\"");
'
tool() { perl -e "$MUTANT_TOOL" "$@"; }

records=$(tool parse "$LIST") || exit 2
names=() files=() equivs=() reasons=()
while IFS=$'\x1f' read -r n f e r; do
    [ -n "$n" ] || continue
    sel=1
    if [ ${#filters[@]} -gt 0 ]; then
        sel=0
        for p in "${filters[@]}"; do
            if printf '%s\n' "$n" | grep -qE -- "$p"; then sel=1; break; fi
        done
    fi
    [ "$sel" = 1 ] || continue
    names+=("$n"); files+=("$f"); equivs+=("$e"); reasons+=("$r")
done <<< "$records"
if [ ${#names[@]} -eq 0 ]; then
    echo "mutate: no mutant in $LIST matches: ${filters[*]:-(no filter)}" >&2
    exit 2
fi

if [ "$mode" = list ]; then
    for i in "${!names[@]}"; do
        if [ "${equivs[$i]}" = 1 ]; then printf '%-36s %-16s equivalent: %s\n' "${names[$i]}" "${files[$i]}" "${reasons[$i]}"
        else printf '%-36s %s\n' "${names[$i]}" "${files[$i]}"; fi
    done
    exit 0
fi

# One result line: STATUS NAME SECONDS [DETAIL]
result() {
    local detail="${4:-}"
    [ ${#detail} -gt 200 ] && detail="${detail:0:197}..."
    printf '%-9s %-36s %5ss  %s\n' "$1" "$2" "$3" "$detail"
}

# --check without --build: text only, against the real working tree (nothing is copied or written)
if [ "$mode" = check ] && [ "$build_check" = 0 ]; then
    bad=0
    for i in "${!names[@]}"; do
        if msg=$(tool apply "$LIST" "${names[$i]}" "$ROOT" --dry); then
            result OK "${names[$i]}" 0 "${files[$i]}"
        else
            rc=$?
            [ $rc -eq 3 ] || exit 2
            result STALE "${names[$i]}" 0 "$msg"
            bad=$((bad + 1))
        fi
    done
    echo "check: ${#names[@]} mutant(s), $bad stale"
    [ $bad -eq 0 ]
    exit
fi

# ---------------------------------------------------------------------------------------------------------------
# Scratch copies: SCRATCH/base holds the built, unmutated working tree; each mutant gets SCRATCH/m (a copy of
# base, binaries included, so make rebuilds only what depends on the mutated file). SCRATCH/shared links to the
# real ../shared, so paths relative to the repository (../shared/data/...) resolve as in the real tree.
tmp_parent=${MUTATE_TMPDIR:-}
if [ -z "$tmp_parent" ]; then
    if [ -d /var/tmp ] && [ -w /var/tmp ]; then tmp_parent=/var/tmp; else tmp_parent=${TMPDIR:-/tmp}; fi
fi
SCRATCH=$(mktemp -d "$tmp_parent/mutate.XXXXXX") || { echo "mutate: cannot create a scratch directory in $tmp_parent" >&2; exit 2; }
SCRATCH=$(cd "$SCRATCH" && pwd -P)
cleanup() {
    if [ "${MUTATE_KEEP:-0}" = 1 ]; then echo "mutate: scratch kept in $SCRATCH"; else rm -rf "$SCRATCH"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
REPO_NAME=$(basename "$ROOT")
BASE="$SCRATCH/base/$REPO_NAME"
mkdir -p "$BASE"
if [ -d "$ROOT/../shared" ]; then
    ln -s "$(cd "$ROOT/../shared" && pwd -P)" "$SCRATCH/base/shared"
    ln -s "$(cd "$ROOT/../shared" && pwd -P)" "$SCRATCH/shared"
fi
if [ -z "${GPT2_VOCAB_DIR:-}" ] && [ -d "$ROOT/../shared/data/gpt2" ]; then
    GPT2_VOCAB_DIR=$(cd "$ROOT/../shared/data/gpt2" && pwd -P)
fi
[ -n "${GPT2_VOCAB_DIR:-}" ] && export GPT2_VOCAB_DIR

# the working tree: tracked files (as they are on disk now) and untracked files that are not ignored
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z -co --exclude-standard) |
        (cd "$ROOT" && while IFS= read -r -d '' f; do [ -f "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done) |
        (cd "$ROOT" && tar --null -T - -cf -) | tar -xf - -C "$BASE" || { echo "mutate: copying the working tree failed" >&2; exit 2; }
else
    (cd "$ROOT" && tar --exclude=./.git -cf - .) | tar -xf - -C "$BASE" || { echo "mutate: copying the working tree failed" >&2; exit 2; }
fi

# Isolation probe: a private /tmp and PID namespace for each test run (see the header).
ISOLATE=0
if [ "${MUTATE_ISOLATE:-1}" = 1 ] && unshare --pid --fork --kill-child --mount --mount-proc true >/dev/null 2>&1; then
    ISOLATE=1
elif [ "${MUTATE_ISOLATE:-1}" = 1 ] && unshare --user --map-root-user --pid --fork --kill-child --mount --mount-proc true >/dev/null 2>&1; then
    ISOLATE=2
fi
case "$SCRATCH" in /tmp/*) [ "$ISOLATE" != 0 ] && { echo "mutate: scratch under /tmp: no private /tmp (set MUTATE_TMPDIR)"; ISOLATE=0; } ;; esac
[ "$ISOLATE" = 0 ] && echo "mutate: warning: tests run without a private /tmp; a concurrent test run may interfere"

# build DIR LOG: make in DIR, quietly; returns make's status
build() {
    # shellcheck disable=SC2086 # (the targets are words)
    (cd "$1" && make -j"$JOBS" ${MUTATE_TARGETS:-all}) >"$2" 2>&1
}

# run_tests DIR LOG: the test command in DIR, under the timeout; returns its status (124/137: timed out)
run_tests() {
    local dir="$1" log="$2"
    mkdir -p "$dir/../tmp"
    # shellcheck disable=SC2016 # expanded by the inner bash
    # (a TMPDIR under /tmp would name a directory the private /tmp does not have: the tests' scratch goes to /tmp)
    local inner='mount --bind "$1" /tmp && cd "$2" && shift 2 && { case "${TMPDIR:-}" in /tmp/*) export TMPDIR=/tmp ;; esac; exec bash -c "$*"; }'
    case "$ISOLATE" in
        1) (cd "$dir" && timeout -k 20 "$TIMEOUT" unshare --pid --fork --kill-child --mount --mount-proc \
                bash -c "$inner" bash "$(cd "$dir/../tmp" && pwd -P)" "$dir" "$TEST_CMD") >"$log" 2>&1 ;;
        2) (cd "$dir" && timeout -k 20 "$TIMEOUT" unshare --user --map-root-user --pid --fork --kill-child --mount --mount-proc \
                bash -c "$inner" bash "$(cd "$dir/../tmp" && pwd -P)" "$dir" "$TEST_CMD") >"$log" 2>&1 ;;
        *) (cd "$dir" && timeout -k 20 "$TIMEOUT" bash -c "$TEST_CMD") >"$log" 2>&1 ;;
    esac
}

# verdict RC LOG: prints the first failing check (empty: the suite passed)
verdict() {
    local rc="$1" log="$2" line
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "timed out after ${TIMEOUT}s"; return; fi
    line=$(grep -m1 -E '^FAIL' "$log")
    if [ -z "$line" ]; then
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | awk '$3 > 0' | head -n 1)
    fi
    if [ -z "$line" ] && [ "$rc" -ne 0 ]; then
        line="exit $rc: $(grep -v '^[[:space:]]*$' "$log" | tail -n 1)"
    fi
    printf '%s' "$line"
}

save_log() { # NAME FILE...
    [ -n "${MUTATE_LOG_DIR:-}" ] || return 0
    mkdir -p "$MUTATE_LOG_DIR" && cat "${@:2}" > "$MUTATE_LOG_DIR/$1.log" 2>/dev/null
}

echo "mutate: ${#names[@]} mutant(s) from $LIST; scratch $SCRATCH"
if [ "$mode" = run ]; then echo "mutate: test command: $TEST_CMD (timeout ${TIMEOUT}s)"; fi
t0=$(date +%s)
if ! build "$BASE" "$SCRATCH/base.build.log"; then
    echo "mutate: the unmutated working tree does not build:"
    grep -m5 -E 'error|Error' "$SCRATCH/base.build.log"
    exit 2
fi
echo "baseline: built in $(( $(date +%s) - t0 ))s"
if [ "$mode" = run ] && [ "$BASELINE" = 1 ]; then
    t0=$(date +%s)
    run_tests "$BASE" "$SCRATCH/base.test.log"
    rc=$?
    why=$(verdict $rc "$SCRATCH/base.test.log")
    save_log _baseline "$SCRATCH/base.test.log"
    if [ -n "$why" ]; then
        echo "baseline: the unmutated tree FAILS its tests ($(( $(date +%s) - t0 ))s): $why"
        echo "mutate: fix the suite first (MUTATE_BASELINE=0 skips this check)"
        exit 2
    fi
    echo "baseline: tests pass in $(( $(date +%s) - t0 ))s"
fi

killed=() survived=() stale=() invalid=() equivalent=()
M="$SCRATCH/m/$REPO_NAME"
for i in "${!names[@]}"; do
    name=${names[$i]}
    if [ "${equivs[$i]}" = 1 ] && [ "$RUN_EQUIV" != 1 ] && [ "$mode" = run ]; then
        result EQUIV "$name" 0 "skipped (marked equivalent; MUTATE_EQUIVALENT=1 runs it)"
        equivalent+=("$name")
        continue
    fi
    t0=$(date +%s)
    rm -rf "$SCRATCH/m"
    mkdir -p "$SCRATCH/m"
    [ -e "$SCRATCH/base/shared" ] && cp -P "$SCRATCH/base/shared" "$SCRATCH/m/shared"
    cp -a "$BASE" "$M"
    where=$(tool apply "$LIST" "$name" "$M")
    rc=$?
    if [ $rc -ne 0 ]; then
        [ $rc -eq 3 ] || exit 2
        result STALE "$name" 0 "$where"
        stale+=("$name")
        continue
    fi
    touch "$M/${files[$i]}" # newer than every binary, whatever the clock granularity
    if ! build "$M" "$SCRATCH/m/build.log"; then
        save_log "$name" "$SCRATCH/m/build.log"
        result INVALID "$name" $(( $(date +%s) - t0 )) "$where: $(grep -m1 'error' "$SCRATCH/m/build.log")"
        invalid+=("$name")
        continue
    fi
    if [ "$mode" = check ]; then
        result OK "$name" $(( $(date +%s) - t0 )) "$where: builds"
        continue
    fi
    run_tests "$M" "$SCRATCH/m/test.log"
    rc=$?
    why=$(verdict $rc "$SCRATCH/m/test.log")
    save_log "$name" "$SCRATCH/m/build.log" "$SCRATCH/m/test.log"
    secs=$(( $(date +%s) - t0 ))
    if [ -n "$why" ]; then
        [ "${equivs[$i]}" = 1 ] && why="(marked equivalent, but killed: remove the mark) $why"
        result KILLED "$name" "$secs" "$why"
        killed+=("$name")
    elif [ "${equivs[$i]}" = 1 ]; then
        result EQUIV "$name" "$secs" "survived, as marked: ${reasons[$i]}"
        equivalent+=("$name")
    else
        result SURVIVED "$name" "$secs" "$where"
        survived+=("$name")
    fi
done
rm -rf "$SCRATCH/m"

if [ "$mode" = check ]; then
    echo "check: ${#names[@]} mutant(s), ${#stale[@]} stale, ${#invalid[@]} invalid"
    [ ${#stale[@]} -eq 0 ] && [ ${#invalid[@]} -eq 0 ]
    exit
fi
total=$(( ${#killed[@]} + ${#survived[@]} ))
pct=0
[ $total -gt 0 ] && pct=$(( 100 * ${#killed[@]} / total ))
echo "score: ${#killed[@]}/$total killed ($pct%); stale ${#stale[@]}, invalid ${#invalid[@]}, equivalent ${#equivalent[@]}"
[ ${#stale[@]} -gt 0 ] && echo "stale (fix their find text): ${stale[*]}"
[ ${#invalid[@]} -gt 0 ] && echo "invalid (do not compile): ${invalid[*]}"
echo "survivors: ${survived[*]:-none}"
[ ${#survived[@]} -eq 0 ] && [ ${#stale[@]} -eq 0 ] && [ ${#invalid[@]} -eq 0 ]
