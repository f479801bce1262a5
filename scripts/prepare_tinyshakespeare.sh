#!/usr/bin/env bash
# prepare_tinyshakespeare.sh: tinyshakespeare as GPT-2 token shards, the same tokens as llm.c's
# dev/data/tinyshakespeare.py, plus llm.c's gpt2_tokenizer.bin.
#
#   scripts/prepare_tinyshakespeare.sh [OUT_DIR]          (default OUT_DIR: data/tinyshakespeare)
#   DATA_MIRROR=../shared/data scripts/prepare_tinyshakespeare.sh     (offline: tests and CI)
#
# Inputs: with DATA_MIRROR set, $DATA_MIRROR/tinyshakespeare.txt and $DATA_MIRROR/gpt2/{encoder.json,vocab.bpe};
# otherwise they are downloaded (curl or wget) into data/ (GPT2_VOCAB_DIR, if set, names an existing vocab dir).
# Builds ./tokenize (make tokenize) if it is missing.
#
# Outputs in OUT_DIR:
#   tiny_shakespeare_val_000000.bin     the first 32768 tokens
#   tiny_shakespeare_train_000000.bin   the rest (305260 tokens)
#   gpt2_tokenizer.bin                  for decoding samples in the trainer
# Documents as in llm.c: the text is cut after every blank line ("\n\n" stays at the end of its document) and
# each document is preceded by <|endoftext|>; the validation split is the first 32768 tokens of that stream.
# Idempotent: does nothing when all three outputs exist. Shards are written atomically by ./tokenize.
set -euo pipefail

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$(abspath "${1:-data/tinyshakespeare}")"
VAL="$OUT_DIR/tiny_shakespeare_val_000000.bin"
TRAIN="$OUT_DIR/tiny_shakespeare_train_000000.bin"
TOKBIN="$OUT_DIR/gpt2_tokenizer.bin"
TEXT_URL="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
VOCAB_URL="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main"

if [[ -f "$VAL" && -f "$TRAIN" && -f "$TOKBIN" ]]; then
    echo "prepare_tinyshakespeare: $OUT_DIR is up to date"
    exit 0
fi

# download URL FILE: fetches to a temporary name and renames, so an interrupted download leaves nothing behind
download() {
    local tmp="$2.tmp.$$"
    echo "prepare_tinyshakespeare: downloading $1"
    if command -v curl >/dev/null; then
        curl -fsSL --retry 3 -o "$tmp" "$1" || { rm -f "$tmp"; echo "error: download of $1 failed" >&2; exit 1; }
    elif command -v wget >/dev/null; then
        wget -q -O "$tmp" "$1" || { rm -f "$tmp"; echo "error: download of $1 failed" >&2; exit 1; }
    else
        echo "error: neither curl nor wget is installed; set DATA_MIRROR to a folder with tinyshakespeare.txt and gpt2/" >&2
        exit 1
    fi
    mv "$tmp" "$2"
}

if [[ -n "${DATA_MIRROR:-}" ]]; then
    MIRROR="$(abspath "$DATA_MIRROR")"
    TEXT="$MIRROR/tinyshakespeare.txt"
    VOCAB="${GPT2_VOCAB_DIR:+$(abspath "$GPT2_VOCAB_DIR")}"
    VOCAB="${VOCAB:-$MIRROR/gpt2}"
    [[ -f "$TEXT" ]] || { echo "error: DATA_MIRROR: '$TEXT' not found" >&2; exit 1; }
else
    mkdir -p "$REPO/data"
    TEXT="$REPO/data/tinyshakespeare.txt"
    [[ -f "$TEXT" ]] || download "$TEXT_URL" "$TEXT"
    if [[ -n "${GPT2_VOCAB_DIR:-}" ]]; then
        VOCAB="$(abspath "$GPT2_VOCAB_DIR")"
    else
        VOCAB="$REPO/data/gpt2"
        mkdir -p "$VOCAB"
        [[ -f "$VOCAB/encoder.json" ]] || download "$VOCAB_URL/encoder.json" "$VOCAB/encoder.json"
        [[ -f "$VOCAB/vocab.bpe" ]] || download "$VOCAB_URL/vocab.bpe" "$VOCAB/vocab.bpe"
    fi
fi

cd "$REPO"
[[ -x ./tokenize ]] || make tokenize
mkdir -p "$OUT_DIR"
./tokenize shards --vocab "$VOCAB" --out-dir "$OUT_DIR" --name tiny_shakespeare \
    --doc-sep '\n\n' --val-tokens 32768 "$TEXT"
./tokenize export-bin --vocab "$VOCAB" --out "$TOKBIN"
echo "prepare_tinyshakespeare: done, outputs in $OUT_DIR"
