#!/usr/bin/env bash
# GPT-2 (1558M), "the" GPT-2, from scratch on 33.5B tokens of FineWeb-Edu: llm.c's reproduction
# (karpathy/llm.c scripts/run_gpt2_1558M.sh and its discussion #677: one 8xH100 node, 24 hours).
#
#   scripts/run_gpt2_1558M.sh                  train; re-running continues from the newest checkpoint
#   DRY_RUN=1 scripts/run_gpt2_1558M.sh        2 steps of this configuration scaled down on the CPU, and the plan
#   NODES=2 HOSTFILE=hosts scripts/run_gpt2_1558M.sh       16 GPUs on 2 machines (hostfile: "node1 slots=8" lines)
# Machine and layout from the environment: NODES, GPUS_PER_NODE (8), HOSTFILE, TP, PP, ZERO (1), MPIRUN_ARGS,
# TRAINER, OUT (out/gpt2_1558M); scripts/run_lib.sh says what each does. Fewer GPUs keep the global batch through
# gradient accumulation (GPUS_PER_NODE=1: 64x), so the run is the same, only slower.
#
# The run: 32,000 steps of 1,048,576 tokens (2^20: 16 sequences of 1024 tokens on each of 8 GPUs, 8 micro-steps) =
# 33.5B tokens from FineWeb-Edu's 100BT sample; peak learning rate 6e-4 after 700 warmup steps, cosine decay to 10%
# (0.1); AdamW with beta (0.9, 0.95), weight decay 0.1, gradients clipped at norm 1.0; bf16 with fp32 master
# weights; ZeRO-1 (the planner puts it at 53 GB per 80 GB GPU).
# Expected: llm.c's run reaches OpenAI's GPT-2 1.5B on HellaSwag around step 25,000 (that checkpoint scores acc_norm
# 0.4893 on this completion-style evaluation, acc 0.3842); the run has 32,000.
# Time on 8 H100s: llm.c measured 2.8 s per step (about 24 hours); the planner estimates 2.73 s per step at 50% MFU
# (about 24 hours; ./train_gpt --plan 1 ..., an untested estimate).
set -euo pipefail
source "$(dirname "$0")/run_lib.sh"
run_init gpt2_1558M

# the data: FineWeb-Edu's 100BT sample as GPT-2 token shards (scripts/prepare_fineweb.sh), HellaSwag's validation set
DATA="$(data_dir edu_fineweb100B)"
HELLASWAG="$(data_dir hellaswag)"
build
prepare_fineweb "$DATA" edu 100BT
prepare_hellaswag "$HELLASWAG"

ARGS=(
    --model gpt2-1558M
    --train "$DATA/fineweb_train_*.bin" --val "$DATA/fineweb_val_*.bin" --shuffle 1
    --batch-size 16 --seq-len 1024 --total-batch-size 1048576
    --steps 32000
    --lr 6e-4 --lr-schedule cosine --warmup 700 --final-lr-frac 0.1
    --weight-decay 0.1 --grad-clip 1.0
    --dtype bf16 --zero "${ZERO:-1}" --tp "$TP" --pp "$PP" --recompute 0
    --val-every 250 --val-steps 20
    --hellaswag "$HELLASWAG/hellaswag_val.bin" --hellaswag-every 250
    --sample-every 300000 --gen-tokens 384 --tokenizer "$DATA/gpt2_tokenizer.bin"
    --checkpoint-every 2000 --out "$OUT" --log "$OUT/log.jsonl"
)
run_training
