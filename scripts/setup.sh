#!/usr/bin/env bash
# scripts/setup.sh: installs what a fresh Debian/Ubuntu machine lacks to build and test the trainer: a C compiler
# and make, OpenBLAS (OpenMP build), Open MPI, PCRE2 (tokenizer), xxHash (checkpoint checksums), cJSON (every JSON:
# encoder.json, safetensors headers, config.json), gnuplot (loss plots), and clang with libFuzzer and the sanitizer
# runtimes (`make fuzz`; on Debian 12 libFuzzer is in libclang-rt-dev, only recommended by clang); optionally zlib
# (parquet_text's GZIP pages; without it the build refuses those, and setup does not fail where it cannot be had).
# Installs only what is missing. Used by the README's commands and by .ci/run. Idempotent; quiet when everything is
# present.
set -euo pipefail
pkgs=(build-essential libopenblas-openmp-dev libopenmpi-dev openmpi-bin libpcre2-dev libcjson-dev clang libclang-rt-dev gnuplot-nox libxxhash-dev)
optional=(zlib1g-dev)
missing=()
missing_optional=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
for p in "${optional[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing_optional+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#missing_optional[@]} -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then # only optional packages are missing: try, never fail
    echo "setup: installing ${missing_optional[*]} (optional)"
    { $SUDO apt-get update -q && $SUDO apt-get install -y -q --no-install-recommends "${missing_optional[@]}"; } ||
        echo "setup: warning: could not install ${missing_optional[*]}; building without it"
    exit 0
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
if [ ${#missing_optional[@]} -gt 0 ]; then
    $SUDO apt-get install -y -q --no-install-recommends "${missing_optional[@]}" ||
        echo "setup: warning: could not install ${missing_optional[*]} (optional); building without it"
fi
