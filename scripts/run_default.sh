#!/usr/bin/env bash
# scripts/run_default.sh: the small default job that works on a laptop CPU. Prepares tinyshakespeare as GPT-2
# token shards (from the committed copies in data/, offline), then trains a 4-layer GPT (d4: 256 channels,
# 4 heads, GPT-2 vocabulary) from scratch for a few minutes, printing the validation loss as it falls and a
# decoded sample. Extra arguments go to train_gpt and override the defaults (e.g. --steps 50).
#   make run                                   (installs, builds, runs this)
#   DATA_MIRROR=DIR make run                   (tinyshakespeare.txt and gpt2/ from DIR instead of data/)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR="${DATA_DIR:-data/tinyshakespeare}"
bash scripts/prepare_tinyshakespeare.sh "$DATA_DIR"
mkdir -p out
exec ./train_gpt \
    --model d4 \
    --train "$DATA_DIR/tiny_shakespeare_train_*.bin" \
    --val "$DATA_DIR/tiny_shakespeare_val_*.bin" \
    --tokenizer "$DATA_DIR/gpt2_tokenizer.bin" \
    --batch-size 8 --seq-len 64 \
    --steps 200 --lr 2e-3 --warmup 20 --lr-schedule cosine --final-lr-frac 0.1 --weight-decay 0.1 \
    --shuffle 1 \
    --val-every 25 --val-steps 16 \
    --sample-every 100 --gen-tokens 48 \
    --checkpoint-every 100 --out out/default \
    --log out/default.jsonl \
    "$@"
