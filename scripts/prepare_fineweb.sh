#!/usr/bin/env bash
# prepare_fineweb.sh: FineWeb (or FineWeb-Edu) 10B-token sample as GPT-2 token shards, laid out like llm.c's
# dev/data/fineweb.py: 100M tokens per shard, the first 100M tokens are the validation split. Needs the network,
# python3 with pyarrow (pip install pyarrow) and about 20 GB of disk for the shards; not run by the tests.
#
#   scripts/prepare_fineweb.sh [OUT_DIR]        (default OUT_DIR: data/fineweb10B, or data/edu_fineweb10B)
#   FINEWEB_VARIANT=fineweb|edu                 (default fineweb)
#   FINEWEB_NUM_FILES=N                         parquet files of the sample to use (default 14: all of 10BT)
#   GPT2_VOCAB_DIR=DIR                          existing vocab dir (default: data/gpt2, downloaded if missing)
#
# The parquet files are fetched one at a time to a temporary folder, their "text" column is written as
# NUL-terminated documents into one `./tokenize shards` process, and each file is deleted when read. Every
# document is preceded by <|endoftext|>. Output: OUT_DIR/fineweb_val_000000.bin, fineweb_train_000000.bin, ...
# and gpt2_tokenizer.bin. Idempotent: skips when OUT_DIR/DONE exists (written only after a complete run).
set -euo pipefail

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VARIANT="${FINEWEB_VARIANT:-fineweb}"
case "$VARIANT" in
    fineweb) REPO_ID="HuggingFaceFW/fineweb"; DEFAULT_OUT="data/fineweb10B" ;;
    edu) REPO_ID="HuggingFaceFW/fineweb-edu"; DEFAULT_OUT="data/edu_fineweb10B" ;;
    *) echo "error: FINEWEB_VARIANT: '$VARIANT' is not fineweb or edu" >&2; exit 1 ;;
esac
OUT_DIR="$(abspath "${1:-$DEFAULT_OUT}")"
NUM_FILES="${FINEWEB_NUM_FILES:-14}"
[[ "$NUM_FILES" =~ ^[1-9][0-9]*$ ]] || { echo "error: FINEWEB_NUM_FILES: '$NUM_FILES' is not a positive integer" >&2; exit 1; }
BASE="https://huggingface.co/datasets/$REPO_ID/resolve/main/sample/10BT"
VOCAB_URL="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main"

if [[ -f "$OUT_DIR/DONE" ]]; then echo "prepare_fineweb: $OUT_DIR is up to date"; exit 0; fi
command -v curl >/dev/null || { echo "error: curl is needed to download the dataset" >&2; exit 1; }
python3 -c 'import pyarrow.parquet' 2>/dev/null || { echo "error: python3 with pyarrow is needed (pip install pyarrow)" >&2; exit 1; }

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
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# Writes every document of every parquet file to stdout, each followed by a NUL byte.
produce() {
    for ((i = 0; i < NUM_FILES; i++)); do
        local name
        name="$(printf '%03d_00000.parquet' "$i")"
        echo "prepare_fineweb: downloading $name" >&2
        curl -fsSL --retry 3 -o "$TMP/part.parquet" "$BASE/$name"
        python3 -c '
import sys, pyarrow.parquet as pq
out = sys.stdout.buffer
for batch in pq.ParquetFile(sys.argv[1]).iter_batches(columns=["text"], batch_size=4096):
    for text in batch.column(0).to_pylist():
        out.write(text.encode("utf-8", "surrogatepass").replace(b"\0", b""))
        out.write(b"\0")
' "$TMP/part.parquet"
        rm -f "$TMP/part.parquet"
    done
}

produce | ./tokenize shards --vocab "$VOCAB" --out-dir "$OUT_DIR" --name fineweb \
    --shard-size 100000000 --val-tokens 100000000 --doc-sep '\0' --drop-sep
./tokenize export-bin --vocab "$VOCAB" --out "$OUT_DIR/gpt2_tokenizer.bin"
touch "$OUT_DIR/DONE"
echo "prepare_fineweb: done, outputs in $OUT_DIR"
