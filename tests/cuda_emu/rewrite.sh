#!/usr/bin/env bash
# tests/cuda_emu/rewrite.sh OUTDIR FILE...: copies the CUDA backend's sources into OUTDIR (keeping their relative
# paths), each kernel launch `k<<<grid, block[, smem[, stream]]>>>(args)` rewritten as
# `emu_launch("k", k, grid, block[, smem[, stream]])(args)`, the call the CPU emulation (cuda_emu.h) runs, and each
# shared-memory declaration `__shared__ T a[N][M], b;` as `static emu::Shared<T[N][M]> a("a"); static emu::Shared<T>
# b("b");` (on the same line), whose accesses the emulation checks for races and bounds; `__shared__ __align__(N) T
# a[..]` becomes `emu::Shared<T[..], N>` (aligned to N; without it the emulation gives the array no more alignment
# than its element's, as a GPU promises no more).
# A launch whose <<< and >>> are not on one line is an error, so none slips through unrewritten; so is a __shared__
# declaration of another form.
set -euo pipefail
out=$1; shift
for f in "$@"; do
    mkdir -p "$out/$(dirname "$f")"
    perl -pe 's/\b(\w+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(/emu_launch("$1", $1, $2)(/g;
              s{^(\s*)__shared__\s+(?:__align__\((\d+)\)\s+)?(\w+)\s+([\w\[\]\s,+*/]+);}{
                  my ($ind, $align, $type, $decls) = ($1, $2, $3, $4);
                  my $al = defined $align ? ", $align" : "";
                  $ind . join(" ", map { /^\s*(\w+)\s*((?:\[[^\]]+\])*)\s*$/ or die "rewrite.sh: $ARGV: a __shared__ declaration of another form: $_\n";
                                         "static emu::Shared<$type$2$al> $1(\"$1\");" } split(/,/, $decls))
              }e' "$f" > "$out/$f.tmp"
    if grep -n '__shared__' "$out/$f.tmp" | grep -v '^\s*[0-9]*:\s*//' | grep -q .; then
        echo "rewrite.sh: $f: a __shared__ declaration left unrewritten (one per line: __shared__ TYPE NAME[DIMS], ...;):" >&2
        grep -n '__shared__' "$out/$f.tmp" >&2
        exit 1
    fi
    if grep -n '<<<\|>>>' "$out/$f.tmp" | grep -v '^\s*[0-9]*:\s*//' | grep -q .; then
        echo "rewrite.sh: $f: a kernel launch left unrewritten:" >&2
        grep -n '<<<\|>>>' "$out/$f.tmp" >&2
        exit 1
    fi
    if cmp -s "$out/$f.tmp" "$out/$f"; then rm "$out/$f.tmp"; else mv "$out/$f.tmp" "$out/$f"; fi
done
