#!/usr/bin/env bash
# prepare_tinyshakespeare.sh: tinyshakespeare as GPT-2 token shards, the same tokens as llm.c's
# dev/data/tinyshakespeare.py, plus llm.c's gpt2_tokenizer.bin.
#
#   scripts/prepare_tinyshakespeare.sh [OUT_DIR]          (default OUT_DIR: data/tinyshakespeare)
#
# Inputs: the committed copies data/tinyshakespeare.txt and data/gpt2/{encoder.json,vocab.bpe} (see data/README.md),
# checked against their sha256 first; DATA_MIRROR=DIR takes DIR/tinyshakespeare.txt and DIR/gpt2/ instead (also
# checked), GPT2_VOCAB_DIR names another vocabulary folder. Works offline.
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
if [[ -f "$VAL" && -f "$TRAIN" && -f "$TOKBIN" ]]; then
    echo "prepare_tinyshakespeare: $OUT_DIR is up to date"
    exit 0
fi

SRC="$REPO/data"
[[ -n "${DATA_MIRROR:-}" ]] && SRC="$(abspath "$DATA_MIRROR")"
TEXT="$SRC/tinyshakespeare.txt"
VOCAB="${GPT2_VOCAB_DIR:+$(abspath "$GPT2_VOCAB_DIR")}"
VOCAB="${VOCAB:-$SRC/gpt2}"

# check FILE SHA256: the input must be the published file (data/README.md lists where each comes from)
check() {
    [[ -f "$1" ]] || { echo "error: '$1' not found (a fresh clone has it in data/; see data/README.md)" >&2; exit 1; }
    if command -v sha256sum >/dev/null; then
        local got
        got=$(sha256sum "$1" | cut -d' ' -f1)
        [[ "$got" == "$2" ]] || { echo "error: '$1' has sha256 $got, expected $2 (see data/README.md)" >&2; exit 1; }
    fi
}
check "$TEXT" 86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
check "$VOCAB/encoder.json" 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
check "$VOCAB/vocab.bpe" 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

cd "$REPO"
[[ -x ./tokenize ]] || make tokenize
mkdir -p "$OUT_DIR"
./tokenize shards --vocab "$VOCAB" --out-dir "$OUT_DIR" --name tiny_shakespeare \
    --doc-sep '\n\n' --val-tokens 32768 "$TEXT"
./tokenize export-bin --vocab "$VOCAB" --out "$TOKBIN"
echo "prepare_tinyshakespeare: done, outputs in $OUT_DIR"
