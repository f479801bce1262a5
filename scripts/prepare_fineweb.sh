#!/usr/bin/env bash
# prepare_fineweb.sh: a FineWeb (or FineWeb-Edu) sample as GPT-2 token shards, laid out like llm.c's
# dev/data/fineweb.py: 100M tokens per shard, the first 100M tokens are the validation split. Needs the network
# and about 20 GB of disk for the 10BT shards (200 GB for 100BT); no Python: ./parquet_text reads the parquet files.
#
#   scripts/prepare_fineweb.sh [OUT_DIR]   (default OUT_DIR: data/fineweb10B, data/fineweb100B, data/edu_fineweb10B or
#                                           data/edu_fineweb100B, after the variant and the sample)
#   FINEWEB_VARIANT=fineweb|edu            (default fineweb)
#   FINEWEB_SAMPLE=10BT|100BT              the sample (default 10BT); its files are listed through the Hugging Face API
#                                          (falling back to the names 000_00000.parquet, 001_00000.parquet, ...)
#   FINEWEB_NUM_FILES=N                    only the first N parquet files (default: all of the sample)
#   FINEWEB_SHARD_SIZE=N                   tokens per shard (default 100000000)
#   FINEWEB_VAL_TOKENS=N                   tokens of the validation split, the first ones (default 100000000)
#   FINEWEB_LOCAL=DIR                      read DIR/*.parquet (in name order) instead of downloading: no network, no
#                                          curl (the tests and the dry runs point it at tests/data/fineweb)
#   GPT2_VOCAB_DIR=DIR                     existing vocab dir (default: data/gpt2, downloaded if missing)
#   HF_ENDPOINT=URL                        the Hugging Face Hub to list and download from (default
#                                          https://huggingface.co; a mirror, as huggingface_hub's variable of that name)
#
# Streaming: the parquet files are fetched one at a time to a temporary folder, their "text" column is written as
# NUL-terminated documents (./parquet_text) into one `./tokenize shards` process, and each file is deleted when
# read. Every document is preceded by <|endoftext|>. Output: OUT_DIR/fineweb_val_000000.bin,
# fineweb_train_000000.bin, ... and gpt2_tokenizer.bin.
# Atomic and idempotent: the shards are written to OUT_DIR/.incomplete.PID and moved into OUT_DIR only when every
# file was read and tokenized, then OUT_DIR/DONE is written; a run that fails or is killed leaves no DONE (and its
# partial shards are never moved in), so the next run starts over. A run finding DONE does nothing.
set -euo pipefail

posint() { [[ "$2" =~ ^[1-9][0-9]{0,17}$ ]] || die "$1: '$2' is not a positive integer"; }
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO/scripts/prepare_lib.sh" # defines: abspath, die, clear_dead_stages, gpt2_vocab

VARIANT="${FINEWEB_VARIANT:-fineweb}"
SAMPLE="${FINEWEB_SAMPLE:-10BT}"
case "$VARIANT" in
    fineweb) REPO_ID="HuggingFaceFW/fineweb"; PREFIX="fineweb" ;;
    edu) REPO_ID="HuggingFaceFW/fineweb-edu"; PREFIX="edu_fineweb" ;;
    *) die "FINEWEB_VARIANT: '$VARIANT' is not fineweb or edu" ;;
esac
case "$SAMPLE" in
    10BT | 100BT) ;;
    *) die "FINEWEB_SAMPLE: '$SAMPLE' is not 10BT or 100BT" ;;
esac
OUT_DIR="$(abspath "${1:-data/${PREFIX}${SAMPLE%T}}")"
NUM_FILES="${FINEWEB_NUM_FILES:-}"
[[ -z "$NUM_FILES" ]] || posint FINEWEB_NUM_FILES "$NUM_FILES"
SHARD_SIZE="${FINEWEB_SHARD_SIZE:-100000000}"
posint FINEWEB_SHARD_SIZE "$SHARD_SIZE"
VAL_TOKENS="${FINEWEB_VAL_TOKENS:-100000000}"
posint FINEWEB_VAL_TOKENS "$VAL_TOKENS"
LOCAL=""
if [[ -n "${FINEWEB_LOCAL:-}" ]]; then
    LOCAL="$(abspath "$FINEWEB_LOCAL")"
    [[ -d "$LOCAL" ]] || die "FINEWEB_LOCAL: '$FINEWEB_LOCAL' is not a directory"
fi
HUB="${HF_ENDPOINT:-https://huggingface.co}"
HUB="${HUB%/}"
API="$HUB/api/datasets/$REPO_ID/tree/main/sample/$SAMPLE"
BASE="$HUB/datasets/$REPO_ID/resolve/main"

clear_dead_stages "$OUT_DIR" # (dead runs' staging folders, also beside a complete set)
if [[ -f "$OUT_DIR/DONE" ]]; then echo "prepare_fineweb: $OUT_DIR is up to date"; exit 0; fi

# list_sample: the parquet paths of the sample, from the Hugging Face API. It answers a page of JSON entries like
# {"type":"file","path":"sample/10BT/000_00000.parquet",...} and, when there are more, a header
# `Link: <URL>; rel="next"` naming the next page; the pages are followed to the end (at most 1000).
list_sample() {
    local url="$API" page=0 hdr
    hdr="$(mktemp)"
    while [[ -n "$url" ]] && ((page < 1000)); do
        : > "$hdr"
        curl -fsSL --retry 3 -D "$hdr" "$url" 2>/dev/null | grep -o '"path":"[^"]*\.parquet"' | sed -e 's/^"path":"//' -e 's/"$//' || true
        url="$(tr -d '\r' < "$hdr" | grep -i '^link:' | grep -o '<[^>]*>; *rel="next"' | head -n 1 | sed -e 's/^<//' -e 's/>.*$//' || true)"
        page=$((page + 1))
    done
    rm -f "$hdr"
}

# the files to read: local ones in name order, or the sample's as listed by the Hugging Face API
FILES=()
if [[ -n "$LOCAL" ]]; then
    shopt -s nullglob
    FILES=("$LOCAL"/*.parquet)
    shopt -u nullglob
    ((${#FILES[@]} > 0)) || die "FINEWEB_LOCAL: no *.parquet files in '$LOCAL'"
else
    command -v curl >/dev/null || die "curl is needed to download the dataset (or set FINEWEB_LOCAL=DIR)"
    listing="$(list_sample | sort || true)"
    if [[ -n "$listing" ]]; then
        mapfile -t FILES <<< "$listing"
    else
        n="${NUM_FILES:-}"
        [[ -n "$n" || "$SAMPLE" != 10BT ]] || n=14 # the 10BT sample: 000_00000.parquet .. 013_00000.parquet
        [[ -n "$n" ]] || die "cannot list the files of $REPO_ID sample/$SAMPLE ($API); set FINEWEB_NUM_FILES=N to fetch 000_00000.parquet .. N-1"
        echo "prepare_fineweb: warning: cannot list $API, trying $n files named NNN_00000.parquet" >&2
        for ((i = 0; i < n; i++)); do FILES+=("$(printf 'sample/%s/%03d_00000.parquet' "$SAMPLE" "$i")"); done
    fi
fi
if [[ -n "$NUM_FILES" ]] && ((NUM_FILES < ${#FILES[@]})); then FILES=("${FILES[@]:0:NUM_FILES}"); fi

gpt2_vocab "$REPO"

cd "$REPO"
[[ -x ./tokenize ]] || make tokenize
[[ -x ./parquet_text ]] || make parquet_text
mkdir -p "$OUT_DIR"
STAGE="$OUT_DIR/.incomplete.$$"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP" "$STAGE"' EXIT
mkdir "$STAGE"

# Writes every document of every parquet file to stdout, each followed by a NUL byte; one file on disk at a time.
produce() {
    local f
    for f in "${FILES[@]}"; do
        if [[ -n "$LOCAL" ]]; then
            echo "prepare_fineweb: reading $f" >&2
            ./parquet_text "$f"
        else
            echo "prepare_fineweb: downloading $f" >&2
            curl -fsSL --retry 3 -o "$TMP/part.parquet" "$BASE/$f"
            ./parquet_text "$TMP/part.parquet"
            rm -f "$TMP/part.parquet"
        fi
    done
}

produce | ./tokenize shards --vocab "$VOCAB" --out-dir "$STAGE" --name fineweb \
    --shard-size "$SHARD_SIZE" --val-tokens "$VAL_TOKENS" --doc-sep '\0' --drop-sep
./tokenize export-bin --vocab "$VOCAB" --out "$STAGE/gpt2_tokenizer.bin"
# complete: replace whatever an earlier, unfinished run left, then mark the set done
rm -f "$OUT_DIR"/fineweb_val_*.bin "$OUT_DIR"/fineweb_train_*.bin "$OUT_DIR/gpt2_tokenizer.bin"
mv "$STAGE"/* "$OUT_DIR"/
rm -rf "$STAGE" # before DONE: a kill after it leaves no staging folder beside a complete set
touch "$OUT_DIR/DONE"
echo "prepare_fineweb: done, $(ls "$OUT_DIR" | grep -c '^fineweb_.*\.bin$') shards in $OUT_DIR"
