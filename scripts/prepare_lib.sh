# scripts/prepare_lib.sh: what the data preparation scripts that stage their shards share (sourced by
# prepare_fineweb.sh and prepare_tinystories.sh; not run on its own).

abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }
die() { echo "error: $*" >&2; exit 1; }

# Removes the staging folders OUT_DIR/.incomplete.PID of earlier runs whose process is gone, also beside a complete
# set (a version that wrote DONE before removing its stage left one when killed in between); a running one's is
# left alone.
clear_dead_stages() {
    local d
    for d in "$1"/.incomplete.*; do
        [[ -d "$d" ]] || continue
        kill -0 "${d##*.incomplete.}" 2>/dev/null || rm -rf "$d"
    done
}

# Sets VOCAB to the folder of GPT-2's encoder.json and vocab.bpe: $GPT2_VOCAB_DIR, or REPO/data/gpt2 with what is
# missing there downloaded from OpenAI (each file atomically).
gpt2_vocab() {
    local repo="$1" url="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main" f
    if [[ -n "${GPT2_VOCAB_DIR:-}" ]]; then
        VOCAB="$(abspath "$GPT2_VOCAB_DIR")"
        return
    fi
    VOCAB="$repo/data/gpt2"
    mkdir -p "$VOCAB"
    for f in encoder.json vocab.bpe; do
        [[ -f "$VOCAB/$f" ]] && continue
        command -v curl >/dev/null || die "curl is needed to download the GPT-2 vocabulary ($VOCAB/$f is missing)"
        curl -fsSL --retry 3 -o "$VOCAB/$f.tmp.$$" "$url/$f" && mv "$VOCAB/$f.tmp.$$" "$VOCAB/$f"
    done
}
