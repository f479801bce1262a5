#!/usr/bin/env bash
# scripts/log_lib.sh: sourced by scripts/elastic_run.sh and scripts/run_lib.sh, which restart a run from a checkpoint.

# log_cut LOG STEP: drops the lines of the trainer's JSONL log LOG that belong to steps after STEP (a run resumed from
# STEP's checkpoint runs them again, so they would appear twice). Prints what it dropped, if anything; returns 1 (LOG
# untouched) if it could not rewrite the file.
log_cut() {
    local log="$1" step="$2" tmp before after
    [ -n "$log" ] && [ -f "$log" ] || return 0
    tmp="$log.cut.$$"
    before=$(wc -l < "$log")
    if awk -v s="$step" 'match($0, /^\{"step": [0-9]+/) && substr($0, 10, RLENGTH - 9) + 0 > s { next } { print }' "$log" > "$tmp" &&
        after=$(wc -l < "$tmp") && mv -f "$tmp" "$log"; then
        [ "$before" -eq "$after" ] || echo "cut $log back to step $step ($((before - after)) line(s) of later steps, which the resumed run repeats, dropped)"
        return 0
    fi
    rm -f "$tmp"
    return 1
}
