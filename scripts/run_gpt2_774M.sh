#!/usr/bin/env bash
# GPT-2 (774M) from scratch on 150B tokens of FineWeb: llm.c's run of GPT-2 large
# (karpathy/llm.c scripts/run_gpt2_774M.sh), ten times the compute of the 350M run.
#
#   scripts/run_gpt2_774M.sh                  train; re-running continues from the newest checkpoint
#   DRY_RUN=1 scripts/run_gpt2_774M.sh        2 steps of this configuration scaled down on the CPU, and the plan
#   NODES=2 HOSTFILE=hosts scripts/run_gpt2_774M.sh       16 GPUs on 2 machines (hostfile: "node1 slots=8" lines)
# Machine and layout from the environment: NODES, GPUS_PER_NODE (8), HOSTFILE, TP, PP, ZERO (1), MPIRUN_ARGS,
# TRAINER, OUT (out/gpt2_774M); scripts/run_lib.sh says what each does. Fewer GPUs keep the global batch through
# gradient accumulation (GPUS_PER_NODE=1: 16x), so the run is the same, only slower.
#
# The run: 286,102 steps of 524,288 tokens (32 sequences of 1024 tokens on each of 8 GPUs, 2 micro-steps) = 150B
# tokens, one and a half passes over FineWeb's 100BT sample; peak learning rate 2.5e-4 after 700 warmup steps,
# cosine decay to 0; AdamW with beta (0.9, 0.95), weight decay 0.1, gradients clipped at norm 1.0; bf16 with fp32
# master weights; ZeRO-1 (the planner puts it at 55 GB per 80 GB GPU).
# Expected: llm.c publishes no final figures for this size. The reference point is OpenAI's GPT-2 large, evaluated
# the same way: ./train_gpt --init DIR_WITH_ITS_model.safetensors --eval-hellaswag data/hellaswag/hellaswag_val.bin
# Time on 8 H100s: llm.c measured about 1.7 s per step on 8 A100s (135 hours); the planner estimates 691 ms per step
# on 8 H100-class GPUs at 50% MFU (about 55 hours; ./train_gpt --plan 1 ..., an untested estimate).
set -euo pipefail
source "$(dirname "$0")/run_lib.sh"
run_init gpt2_774M

# the data: FineWeb's 100BT sample as GPT-2 token shards (scripts/prepare_fineweb.sh), HellaSwag's validation set
DATA="$(data_dir fineweb100B)"
HELLASWAG="$(data_dir hellaswag)"
build
prepare_fineweb "$DATA" fineweb 100BT
prepare_hellaswag "$HELLASWAG"

ARGS=(
    --model gpt2-774M
    --train "$DATA/fineweb_train_*.bin" --val "$DATA/fineweb_val_*.bin" --shuffle 1
    --batch-size 32 --seq-len 1024 --total-batch-size 524288
    --steps 286102
    --lr 2.5e-4 --lr-schedule cosine --warmup 700 --final-lr-frac 0.0
    --weight-decay 0.1 --grad-clip 1.0
    --dtype bf16 --zero "${ZERO:-1}" --tp "$TP" --pp "$PP" --recompute 0
    --val-every 250 --val-steps 20
    --hellaswag "$HELLASWAG/hellaswag_val.bin" --hellaswag-every 250
    --sample-every 300000 --gen-tokens 144 --tokenizer "$DATA/gpt2_tokenizer.bin"
    --checkpoint-every 4000 --out "$OUT" --log "$OUT/log.jsonl"
)
run_training
