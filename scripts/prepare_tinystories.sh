#!/usr/bin/env bash
# prepare_tinystories.sh: TinyStories (GPT-4 stories, V2) as GPT-2 token shards. Needs the network; not run by
# the tests.
#
#   scripts/prepare_tinystories.sh [OUT_DIR]        (default OUT_DIR: data/tinystories)
#   GPT2_VOCAB_DIR=DIR to use an existing vocab dir (default: data/gpt2, downloaded if missing)
#
# Streams the dataset's two text files through ./tokenize shards (nothing but the shards is stored):
#   TinyStoriesV2-GPT4-valid.txt -> OUT_DIR/tinystories_val_000000.bin
#   TinyStoriesV2-GPT4-train.txt -> OUT_DIR/tinystories_train_000000.bin, ... (100M tokens per shard)
# plus OUT_DIR/gpt2_tokenizer.bin. In those files stories are separated by a line "<|endoftext|>"; that line is
# dropped and each story is preceded by the token <|endoftext|>. Idempotent: skips when OUT_DIR/DONE exists.
set -euo pipefail

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="$(abspath "${1:-data/tinystories}")"
BASE="https://huggingface.co/datasets/roneneldan/TinyStories/resolve/main"
VOCAB_URL="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main"

if [[ -f "$OUT_DIR/DONE" ]]; then echo "prepare_tinystories: $OUT_DIR is up to date"; exit 0; fi
command -v curl >/dev/null || { echo "error: curl is needed to stream the dataset" >&2; exit 1; }

if [[ -n "${GPT2_VOCAB_DIR:-}" ]]; then
    VOCAB="$(abspath "$GPT2_VOCAB_DIR")"
else
    VOCAB="$REPO/data/gpt2"
    mkdir -p "$VOCAB"
    for f in encoder.json vocab.bpe; do
        [[ -f "$VOCAB/$f" ]] || { curl -fsSL --retry 3 -o "$VOCAB/$f.tmp.$$" "$VOCAB_URL/$f" && mv "$VOCAB/$f.tmp.$$" "$VOCAB/$f"; }
    done
fi

cd "$REPO"
[[ -x ./tokenize ]] || make tokenize
mkdir -p "$OUT_DIR"
for split in val train; do
    file=TinyStoriesV2-GPT4-$([[ $split == val ]] && echo valid || echo train).txt
    echo "prepare_tinystories: streaming $file"
    curl -fsSL --retry 3 "$BASE/$file" |
        ./tokenize shards --vocab "$VOCAB" --out-dir "$OUT_DIR" --name tinystories --split "$split" \
            --doc-sep '\n<|endoftext|>\n' --drop-sep
done
./tokenize export-bin --vocab "$VOCAB" --out "$OUT_DIR/gpt2_tokenizer.bin"
touch "$OUT_DIR/DONE"
echo "prepare_tinystories: done, outputs in $OUT_DIR"
