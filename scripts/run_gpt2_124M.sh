#!/usr/bin/env bash
# GPT-2 (124M) from scratch on 10B tokens of FineWeb: llm.c's reproduction of the smallest GPT-2
# (karpathy/llm.c scripts/run_gpt2_124M.sh and its discussion #481), with the GPT-3 paper's optimizer settings.
#
#   scripts/run_gpt2_124M.sh                  train; re-running continues from the newest checkpoint
#   DRY_RUN=1 scripts/run_gpt2_124M.sh        2 steps of this configuration scaled down on the CPU, and the plan
#   NODES=2 HOSTFILE=hosts scripts/run_gpt2_124M.sh       16 GPUs on 2 machines (hostfile: "node1 slots=8" lines)
#   GPUS_PER_NODE=1 scripts/run_gpt2_124M.sh  one GPU: the same global batch through 8x gradient accumulation
# Machine and layout from the environment: NODES, GPUS_PER_NODE (8), HOSTFILE, TP, PP, ZERO (1), MPIRUN_ARGS,
# TRAINER, OUT (out/gpt2_124M); scripts/run_lib.sh says what each does.
#
# The run: 18,865 steps of 524,288 tokens (2^19: 64 sequences of 1024 tokens on each of 8 GPUs) = 9.9B tokens, one
# pass over FineWeb's 10BT sample; peak learning rate 6e-4 after 700 warmup steps, cosine decay to 0; AdamW with
# beta (0.9, 0.95), weight decay 0.1 on the matrices and embeddings, gradients clipped at norm 1.0; bf16 with fp32
# master weights; ZeRO-1.
# Expected (llm.c's run of this configuration): FineWeb validation loss about 3.3 at the end (read from its plot),
# HellaSwag acc_norm about 0.299 (llm.c reports 29.9%; OpenAI's GPT-2 124M scores 0.2955 on this completion-style
# evaluation, acc 0.2859).
# Time on 8 H100s: llm.c measured about 300 ms per step on 8 A100s (94 minutes); the planner estimates 114 ms per
# step on 8 H100-class GPUs at 50% MFU (about 36 minutes; ./train_gpt --plan 1 ..., an untested estimate).
set -euo pipefail
source "$(dirname "$0")/run_lib.sh"
run_init gpt2_124M

# the data: FineWeb's 10BT sample as GPT-2 token shards (scripts/prepare_fineweb.sh), HellaSwag's validation set
DATA="$(data_dir fineweb10B)"
HELLASWAG="$(data_dir hellaswag)"
build
prepare_fineweb "$DATA" fineweb 10BT
prepare_hellaswag "$HELLASWAG"

ARGS=(
    --model gpt2-124M
    --train "$DATA/fineweb_train_*.bin" --val "$DATA/fineweb_val_*.bin" --shuffle 1
    --batch-size 64 --seq-len 1024 --total-batch-size 524288
    --steps 18865
    --lr 6e-4 --lr-schedule cosine --warmup 700 --final-lr-frac 0.0
    --weight-decay 0.1 --grad-clip 1.0
    --dtype bf16 --zero "${ZERO:-1}" --tp "$TP" --pp "$PP" --recompute 0
    --val-every 250 --val-steps 20
    --hellaswag "$HELLASWAG/hellaswag_val.bin" --hellaswag-every 250
    --sample-every 20000 --gen-tokens 144 --tokenizer "$DATA/gpt2_tokenizer.bin"
    --checkpoint-every 5000 --out "$OUT" --log "$OUT/log.jsonl"
)
run_training
