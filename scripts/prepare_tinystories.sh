#!/usr/bin/env bash
# prepare_tinystories.sh: TinyStories (GPT-4 stories, V2) as GPT-2 token shards. Needs the network, unless
# TINYSTORIES_LOCAL names a folder holding the two files.
#
#   scripts/prepare_tinystories.sh [OUT_DIR]        (default OUT_DIR: data/tinystories)
#   TINYSTORIES_LOCAL=DIR        read DIR/TinyStoriesV2-GPT4-{valid,train}.txt instead of downloading (no network, no
#                                curl; the tests point it at tests/data/tinystories)
#   TINYSTORIES_SHARD_SIZE=N     tokens per shard (default 100000000)
#   GPT2_VOCAB_DIR=DIR           an existing vocab dir (default: data/gpt2, downloaded if missing)
#   HF_ENDPOINT=URL              the Hugging Face Hub to download from (default https://huggingface.co; a mirror)
#
# Streams the dataset's two text files through ./tokenize shards (nothing but the shards is stored):
#   TinyStoriesV2-GPT4-valid.txt -> OUT_DIR/tinystories_val_000000.bin, ...
#   TinyStoriesV2-GPT4-train.txt -> OUT_DIR/tinystories_train_000000.bin, ...
# plus OUT_DIR/gpt2_tokenizer.bin. In those files stories are separated by a line "<|endoftext|>"; that line is
# dropped and each story is preceded by the token <|endoftext|>.
# Atomic and idempotent: the shards are written to OUT_DIR/.incomplete.PID and moved into OUT_DIR only when both
# files were tokenized, then OUT_DIR/DONE is written; a run that fails or is killed leaves no DONE and no partial
# set. A run finding DONE does nothing.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$REPO/scripts/prepare_lib.sh" # defines: abspath, die, clear_dead_stages, gpt2_vocab
OUT_DIR="$(abspath "${1:-data/tinystories}")"
SHARD_SIZE="${TINYSTORIES_SHARD_SIZE:-100000000}"
[[ "$SHARD_SIZE" =~ ^[1-9][0-9]{0,17}$ ]] || die "TINYSTORIES_SHARD_SIZE: '$SHARD_SIZE' is not a positive integer"
LOCAL=""
if [[ -n "${TINYSTORIES_LOCAL:-}" ]]; then
    LOCAL="$(abspath "$TINYSTORIES_LOCAL")"
    [[ -d "$LOCAL" ]] || die "TINYSTORIES_LOCAL: '$TINYSTORIES_LOCAL' is not a directory"
    for f in TinyStoriesV2-GPT4-valid.txt TinyStoriesV2-GPT4-train.txt; do
        [[ -f "$LOCAL/$f" ]] || die "TINYSTORIES_LOCAL: no $f in '$LOCAL'"
    done
fi
HUB="${HF_ENDPOINT:-https://huggingface.co}"
BASE="${HUB%/}/datasets/roneneldan/TinyStories/resolve/main"

clear_dead_stages "$OUT_DIR" # (dead runs' staging folders, also beside a complete set)
if [[ -f "$OUT_DIR/DONE" ]]; then echo "prepare_tinystories: $OUT_DIR is up to date"; exit 0; fi
[[ -n "$LOCAL" ]] || command -v curl >/dev/null || die "curl is needed to stream the dataset (or set TINYSTORIES_LOCAL=DIR)"

gpt2_vocab "$REPO"

cd "$REPO"
[[ -x ./tokenize ]] || make tokenize
mkdir -p "$OUT_DIR"
STAGE="$OUT_DIR/.incomplete.$$"
trap 'rm -rf "$STAGE"' EXIT
mkdir "$STAGE"
# each split in its own folder: tokenize warns about shards it did not write next to its own
for split in val train; do
    file=TinyStoriesV2-GPT4-$([[ $split == val ]] && echo valid || echo train).txt
    echo "prepare_tinystories: streaming $file"
    if [[ -n "$LOCAL" ]]; then cat "$LOCAL/$file"; else curl -fsSL --retry 3 "$BASE/$file"; fi |
        ./tokenize shards --vocab "$VOCAB" --out-dir "$STAGE/$split" --name tinystories --split "$split" \
            --shard-size "$SHARD_SIZE" --doc-sep '\n<|endoftext|>\n' --drop-sep
done
./tokenize export-bin --vocab "$VOCAB" --out "$STAGE/gpt2_tokenizer.bin"
# complete: replace whatever an earlier, unfinished run left, then mark the set done
rm -f "$OUT_DIR"/tinystories_val_*.bin "$OUT_DIR"/tinystories_train_*.bin "$OUT_DIR/gpt2_tokenizer.bin"
mv "$STAGE"/val/* "$STAGE"/train/* "$STAGE/gpt2_tokenizer.bin" "$OUT_DIR"/
rm -rf "$STAGE" # before DONE: a kill after it leaves no staging folder beside a complete set
touch "$OUT_DIR/DONE"
echo "prepare_tinystories: done, outputs in $OUT_DIR"
