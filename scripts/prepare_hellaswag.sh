#!/usr/bin/env bash
# prepare_hellaswag.sh: HellaSwag's validation set (10042 examples) as llm.c's multiple-choice eval file, for
# `train_gpt --eval-hellaswag` and `--hellaswag` (the format is described at the top of hellaswag.h).
#
#   scripts/prepare_hellaswag.sh [OUT_DIR]                 (default OUT_DIR: data/hellaswag; needs the network)
#   HELLASWAG_JSONL=FILE scripts/prepare_hellaswag.sh ...  from a local copy of hellaswag_val.jsonl (offline)
#
# Downloads hellaswag_val.jsonl from the dataset's repository (the file llm.c's dev/data/hellaswag.py uses) unless
# HELLASWAG_JSONL names one, then converts it with `./tokenize hellaswag` through the GPT-2 tokenizer (the context
# and " " + each ending tokenized separately, as llm.c does) into OUT_DIR/hellaswag_val.bin. GPT2_VOCAB_DIR names
# the vocabulary folder (default: the committed data/gpt2). Builds ./tokenize (make tokenize) if it is missing.
# Idempotent: does nothing when OUT_DIR/hellaswag_val.bin exists. The file is written atomically by ./tokenize.
set -euo pipefail

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$(abspath "${1:-data/hellaswag}")"
OUT="$OUT_DIR/hellaswag_val.bin"
URL="https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
VOCAB="${GPT2_VOCAB_DIR:+$(abspath "$GPT2_VOCAB_DIR")}"
VOCAB="${VOCAB:-$REPO/data/gpt2}"
JSONL="${HELLASWAG_JSONL:+$(abspath "$HELLASWAG_JSONL")}"

if [[ -f "$OUT" ]]; then
    echo "prepare_hellaswag: $OUT is up to date"
    exit 0
fi
mkdir -p "$OUT_DIR"
if [[ -z "$JSONL" ]]; then
    JSONL="$OUT_DIR/hellaswag_val.jsonl"
    if [[ ! -f "$JSONL" ]]; then
        command -v curl >/dev/null || { echo "error: curl is needed to download $URL (or set HELLASWAG_JSONL=FILE)" >&2; exit 1; }
        echo "prepare_hellaswag: downloading $URL"
        curl -fsSL --retry 3 -o "$JSONL.tmp.$$" "$URL" && mv "$JSONL.tmp.$$" "$JSONL"
    fi
fi
[[ -f "$JSONL" ]] || { echo "error: '$JSONL' not found" >&2; exit 1; }

cd "$REPO"
[[ -x ./tokenize ]] || make tokenize
./tokenize hellaswag --vocab "$VOCAB" --out "$OUT" "$JSONL"
echo "prepare_hellaswag: done: $OUT (./train_gpt --init MODEL --eval-hellaswag $OUT)"
