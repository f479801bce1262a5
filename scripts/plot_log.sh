#!/usr/bin/env bash
# scripts/plot_log.sh: plots the JSONL logs of one or several runs (train_gpt --log FILE) with gnuplot: training
# loss (thin) and validation loss (points) against tokens seen, and throughput (tokens/s) below.
#
#   scripts/plot_log.sh out/default.jsonl                         -> out/default.svg
#   scripts/plot_log.sh --out runs.png --logx a.jsonl b.jsonl     several runs, log-scale tokens, PNG
#   scripts/plot_log.sh --title "d12 vs d24" LABEL=a.jsonl ...    LABEL= names a run in the legend (default: file name)
#   scripts/plot_log.sh --table a.jsonl                           the points instead of a plot: "train|val LABEL tokens value"
#
# The tokens seen: a run with a batch ramp logs them ("tokens", through each step); otherwise every step has the same
# tokens, recovered from a training line as tokens_per_s * ms / 1000 (the trainer computes tokens_per_s = tokens per
# step / step time). A validation point at step s sits at the tokens of s steps. Output: SVG or PNG by the extension
# of --out (default: the first log with .svg). Needs gnuplot (Debian: gnuplot-nox; scripts/setup.sh installs it),
# except for --table.
set -euo pipefail

out=""; logx=0; title="training run"; table=0
runs=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        --logx) logx=1; shift ;;
        --table) table=1; shift ;;
        --title) title="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "error: plot_log: unknown flag '$1' (see --help)" >&2; exit 1 ;;
        *) runs+=("$1"); shift ;;
    esac
done
[[ ${#runs[@]} -gt 0 ]] || { echo "error: plot_log: no log given (see --help)" >&2; exit 1; }
((table)) || command -v gnuplot >/dev/null || { echo "error: plot_log: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 1; }

first="${runs[0]#*=}"
[[ -n "$out" ]] || out="${first%.jsonl}.svg"
case "$out" in
    *.svg) term="svg size 900,700 dynamic font 'sans,11' background rgb 'white'" ;;
    *.png) term="pngcairo size 900,700 font 'sans,10'" ;;
    *) echo "error: plot_log: --out '$out' must end in .svg or .png" >&2; exit 1 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
loss_plots=(); speed_plots=()
for i in "${!runs[@]}"; do
    spec="${runs[$i]}"
    if [[ "$spec" == *=* ]]; then label="${spec%%=*}"; log="${spec#*=}"; else log="$spec"; label=$(basename "$log" .jsonl); fi
    [[ -f "$log" ]] || { echo "error: plot_log: '$log' not found" >&2; exit 1; }
    # train lines -> "tokens loss tokens_per_s", val lines -> "tokens val_loss"; a resumed run appends, the last
    # value of a step wins (sorted and deduplicated by step)
    awk -v tr="$tmp/train_$i" -v va="$tmp/val_$i" '
        function num(key,   m) { if (match($0, "\"" key "\": [-0-9.eE+naif]+")) { m = substr($0, RSTART, RLENGTH); sub(/^[^:]*: /, "", m); return m } return "" }
        {
            step = num("step"); if (step == "") next
            if (index($0, "\"val_loss\"")) { val[step] = num("val_loss"); next }
            loss = num("loss"); tps = num("tokens_per_s"); ms = num("ms")
            if (tps != "" && ms != "") { per = int(tps * ms / 1000 + 0.5); if (per > 0) perstep = per }
            train[step] = loss " " tps
            if (num("tokens") != "") seen[step] = num("tokens") # (a batch ramp: the tokens through this step)
        }
        function at(s) { return (s in seen) ? seen[s] : s == 0 ? 0 : s * perstep }
        END {
            for (s in train) print at(s), train[s] | "sort -g > " tr
            for (s in val) print at(s), val[s] | "sort -g > " va
        }' "$log"
    [[ -s "$tmp/train_$i" ]] || { echo "error: plot_log: '$log' has no training lines" >&2; exit 1; }
    if ((table)); then
        awk -v l="$label" '{ print "train", l, $1, $2 }' "$tmp/train_$i"
        [[ -s "$tmp/val_$i" ]] && awk -v l="$label" '{ print "val", l, $1, $2 }' "$tmp/val_$i"
        continue
    fi
    loss_plots+=("'$tmp/train_$i' using 1:2 with lines lw 1 lc $((i + 1)) title '$label train'")
    [[ -s "$tmp/val_$i" ]] && loss_plots+=("'$tmp/val_$i' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc $((i + 1)) title '$label val'")
    speed_plots+=("'$tmp/train_$i' using 1:3 with lines lw 1 lc $((i + 1)) title '$label'")
done

((table)) && exit 0
join() { local IFS=","; echo "$*"; }
{
    echo "set terminal $term"
    echo "set output '$out'"
    echo "set multiplot layout 2,1 title '$title'"
    echo "set grid; set key top right"
    [[ $logx -eq 1 ]] && echo "set logscale x"
    echo "set format x '%.1s%c'"
    echo "set size 1,0.65; set origin 0,0.35"
    echo "set ylabel 'loss'; set xlabel 'tokens'"
    echo "plot $(join "${loss_plots[@]}")"
    echo "set size 1,0.35; set origin 0,0"
    echo "set ylabel 'tokens/s'; set xlabel 'tokens'; set key bottom right"
    echo "plot $(join "${speed_plots[@]}")"
    echo "unset multiplot"
} > "$tmp/plot.gp"
gnuplot "$tmp/plot.gp"
echo "plot_log: wrote $out"
