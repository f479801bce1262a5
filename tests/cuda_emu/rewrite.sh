#!/usr/bin/env bash
# tests/cuda_emu/rewrite.sh OUTDIR FILE...: copies the CUDA backend's sources into OUTDIR (keeping their relative
# paths), each kernel launch `k<<<grid, block[, smem[, stream]]>>>(args)` rewritten as
# `emu_launch("k", k, grid, block[, smem[, stream]])(args)`, the call the CPU emulation (cuda_emu.h) runs.
# A launch whose <<< and >>> are not on one line is an error, so none slips through unrewritten.
set -euo pipefail
out=$1; shift
for f in "$@"; do
    mkdir -p "$out/$(dirname "$f")"
    perl -pe 's/\b(\w+(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\(/emu_launch("$1", $1, $2)(/g' "$f" > "$out/$f.tmp"
    if grep -n '<<<\|>>>' "$out/$f.tmp" | grep -v '^\s*[0-9]*:\s*//' | grep -q .; then
        echo "rewrite.sh: $f: a kernel launch left unrewritten:" >&2
        grep -n '<<<\|>>>' "$out/$f.tmp" >&2
        exit 1
    fi
    if cmp -s "$out/$f.tmp" "$out/$f"; then rm "$out/$f.tmp"; else mv "$out/$f.tmp" "$out/$f"; fi
done
