#!/usr/bin/env bash
# Issue 23 on one H200, in one call of the device tool: the new binary and today's (the branch
# point, c5e044a) side by side on the matvec example with the replay provider at a 6 s latency,
# beam 1 x 4, two rounds, ncu profiling. Run from the repository root:
#   KACTORS=.h200/kactors KACTORS_OLD=.h200/kactors-old BUDGET_S=370 OUT=$OUT bash scripts/h200/issue23/issue23.sh
# Runs in the order new rounds, old rounds, new steady, old steady; a run is started only with
# 90 s of the budget left and is killed (SIGTERM, then SIGKILL 10 s later) past it. After each
# run, summary.md and runs.tgz under $OUT are written again, so a call cut short still returns
# what was measured. The replay candidates in name order put two variants of 01_row_tiles.py in
# the first round: renamed (a compiled duplicate), and renamed with two independent lines
# swapped (whose PTX differs: not one). summary.md: per run, the first LLM request's seconds
# after the process was launched, the start-up's steps, each profile's device time, the device
# time per candidate, the busy fraction, the duplicates of both kinds.
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue23}
KACTORS=$(realpath "${KACTORS:-target/release/kactors}")
KACTORS_OLD=${KACTORS_OLD:-.h200/kactors-old}
BUDGET_S=${BUDGET_S:-370}
LATENCY_S=${LATENCY_S:-6}
HERE=$(pwd)/scripts/h200/issue23
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/kactors-issue23.XXXXXX)
LOGS=$WORK/logs
mkdir -p "$LOGS" "$WORK/runs" "$WORK/configs"
: > "$WORK/exits.txt"
STARTED=$(date +%s)
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,memory.total,driver_version --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    "$KACTORS" --version
    [ -x "$KACTORS_OLD" ] && "$KACTORS_OLD" --version
} > "$OUT/machine.txt" 2>&1
python3 "$HERE/duplicates.py" examples/optimize_01_matvec "$WORK/kernel"

for pacing in rounds steady; do
    {
        echo "platform: nvidia"
        echo "provider: replay"
        echo "replay_latency_s: $LATENCY_S"
        echo "num_workers: 1"
        echo "max_rounds: 2"
        echo "max_refinements: 0"
        [ "$pacing" = steady ] && echo "search: steady"
        echo "strategy_config: {num_top_kernels: 1, num_bottlenecks: 4}"
    } > "$WORK/configs/$pacing.yaml"
done

report() {
    python3 "$HERE/summary.py" "$WORK/runs" "$WORK/exits.txt" > "$OUT/summary.md" 2> "$LOGS/summary.stderr"
    echo "elapsed $(($(date +%s) - STARTED)) s of a budget of $BUDGET_S s" >> "$OUT/summary.md"
    tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='scratch' --exclude='*.cubin' \
        --exclude='*.ncu-rep' --exclude='*.ptx' -C "$WORK" runs 2>/dev/null
    tar czf "$OUT/logs.tgz" -C "$WORK" logs 2>/dev/null
}

# measure NAME BINARY PACING: at most 150 s (a run of two rounds took 116 s to run_finished on
# 2026-12-04, its finale 50 s of them), and never past the budget.
measure() {
    local name=$1 binary=$2 pacing=$3
    local left=$((BUDGET_S - ($(date +%s) - STARTED)))
    if [ "$left" -lt 90 ]; then
        echo "$name skipped: $left s of the budget left" >> "$WORK/skipped.txt"
        return
    fi
    local allowed=$((left < 150 ? left : 150))
    local launched
    launched=$(date +%s.%N)
    timeout -k 10 "$allowed" "$binary" run --strategy "$pacing" --config-dir "$WORK/configs" \
        --kernel-dir "$WORK/kernel" --run-dir "$WORK/runs/$name" \
        --json > "$LOGS/$name.events.jsonl" 2> "$LOGS/$name.stderr"
    echo "$name $? $launched" >> "$WORK/exits.txt"
    report
}

measure new-rounds "$KACTORS" rounds
[ -x "$KACTORS_OLD" ] && measure old-rounds "$(realpath "$KACTORS_OLD")" rounds
measure new-steady "$KACTORS" steady
[ -x "$KACTORS_OLD" ] && measure old-steady "$(realpath "$KACTORS_OLD")" steady
[ -f "$WORK/skipped.txt" ] && cat "$WORK/skipped.txt" >> "$OUT/summary.md"
cat "$OUT/summary.md"
status=0
grep -q '^FAIL' "$OUT/summary.md" && status=1
rm -rf "$WORK"
exit $status
