#!/usr/bin/env bash
# scripts/run_default.sh: the small default job that works on a laptop CPU. Prepares tinyshakespeare as GPT-2
# token shards (from the committed copies in data/, offline), then trains a 4-layer GPT (d4: 256 channels,
# 4 heads, GPT-2 vocabulary) from scratch for a few minutes, printing the validation loss as it falls and a
# decoded sample, then has the trained model continue a prompt and plots the losses (out/default.svg). Extra
# arguments go to train_gpt and replace the defaults of the same long flags (e.g. --steps 50).
#   make run                                   (installs, builds, runs this)
#   DATA_MIRROR=DIR make run                   (tinyshakespeare.txt and gpt2/ from DIR instead of data/)
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR="${DATA_DIR:-data/tinyshakespeare}"
bash scripts/prepare_tinyshakespeare.sh "$DATA_DIR"
mkdir -p out
rm -f out/default.jsonl # a fresh run (the log appends only when resuming)
# the defaults, each dropped when the extra arguments give the same (long) flag, so that they override it
DEFAULTS=(
    --model d4
    --train "$DATA_DIR/tiny_shakespeare_train_*.bin"
    --val "$DATA_DIR/tiny_shakespeare_val_*.bin"
    --tokenizer "$DATA_DIR/gpt2_tokenizer.bin"
    --batch-size 8 --seq-len 64
    --steps 200 --lr 2e-3 --warmup 20 --lr-schedule cosine --final-lr-frac 0.1 --weight-decay 0.1
    --shuffle 1
    --val-every 25 --val-steps 16
    --sample-every 100 --gen-tokens 48
    --checkpoint-every 100 --out out/default
    --log out/default.jsonl
)
given() { local a; for a in "${@:2}"; do [[ "$a" == "$1" || "$a" == "$1="* ]] && return 0; done; return 1; }
ARGS=()
for ((i = 0; i < ${#DEFAULTS[@]}; i += 2)); do
    given "${DEFAULTS[i]}" "$@" || ARGS+=("${DEFAULTS[i]}" "${DEFAULTS[i + 1]}")
done
./train_gpt "${ARGS[@]}" "$@"
# the trained model continues a prompt (the samples above start from nothing); skipped when the extra arguments
# moved the checkpoints or the context
if ! given --out "$@" && ! given --seq-len "$@" && [[ -f out/default/latest ]]; then
    step="$(cat out/default/latest)"
    echo "run_default: the model of step $step continues \"ROMEO:\" (./train_gpt --generate; see README, Sampling)"
    ./train_gpt --init "out/default/model_$(printf '%08d' "$step").bin" --seq-len 64 \
        --generate 1 --prompt "ROMEO:" --gen-tokens 48 --temperature 0.8 --top-k 40 | grep -v '^generate: [0-9]* tokens in'
fi
# the loss curves and throughput of this run, as an SVG (scripts/plot_log.sh; skipped without gnuplot)
if command -v gnuplot >/dev/null; then
    bash scripts/plot_log.sh --title "default job: d4 on tinyshakespeare" --out out/default.svg out/default.jsonl
else
    echo "run_default: no plot (gnuplot is not installed: apt-get install gnuplot-nox)"
fi
