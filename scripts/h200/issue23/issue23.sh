#!/usr/bin/env bash
# Issue 23 parts 1 and 4 (start-up order, compiled duplicates) on one H200, in one call of the
# device tool. Run from the repository root with the release binary at target/release/kactors
# (or $KACTORS), and today's binary, built from the branch point, at .h200/kactors-old (or
# $KACTORS_OLD; left out when absent):
#   OUT=/some/folder bash scripts/h200/issue23/issue23.sh
# On the matvec example with the replay provider at a 6 s latency, in rounds and in steady
# search, the old binary and the new one side by side: the replay candidates in name order put
# two compiled duplicates of 01_row_tiles.py in the first round (renamed, and renamed with two
# independent lines swapped). It leaves under $OUT: machine.txt, summary.md (per run: the first
# request's seconds after launch, the start-up steps, device time per candidate, the busy
# fraction, the duplicates of both kinds), runs.tgz and logs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue23}
KACTORS=$(realpath "${KACTORS:-target/release/kactors}")
KACTORS_OLD=${KACTORS_OLD:-.h200/kactors-old}
BUDGET_S=${BUDGET_S:-400}
LATENCY_S=${LATENCY_S:-6}
HERE=scripts/h200/issue23
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT"
WORK=$(pwd)/.issue23-work
rm -rf "$WORK"
LOGS=$WORK/logs
RESULTS=$WORK/results.txt
mkdir -p "$LOGS" "$WORK/runs" "$WORK/configs"
: > "$RESULTS"
: > "$WORK/exits.txt"
STARTED=$(date +%s)
. scripts/h200/budget.sh
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

# measure NAME BINARY PACING WANTED_S
measure() {
    local name=$1 binary=$2 pacing=$3 wanted=$4
    timeout "$(allowed "$wanted")" "$binary" run --strategy "$pacing" --config-dir "$WORK/configs" \
        --kernel-dir "$WORK/kernel" --run-dir "$WORK/runs/$name" --json \
        > "$LOGS/$name.events.jsonl" 2> "$LOGS/$name.stderr"
    echo "$name $?" >> "$WORK/exits.txt"
}

measure new-rounds "$KACTORS" rounds 100
measure new-steady "$KACTORS" steady 100
if [ -x "$KACTORS_OLD" ]; then
    measure old-rounds "$(realpath "$KACTORS_OLD")" rounds 100
    measure old-steady "$(realpath "$KACTORS_OLD")" steady 100
fi

python3 "$HERE/summary.py" "$WORK/runs" "$WORK/exits.txt" > "$OUT/summary.md" 2> "$LOGS/summary.stderr"
echo "elapsed $(($(date +%s) - STARTED)) s" >> "$OUT/summary.md"
tar czf "$OUT/logs.tgz" -C "$WORK" logs 2>/dev/null
tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='scratch' --exclude='*.cubin' \
    --exclude='*.ncu-rep' -C "$WORK" runs 2>/dev/null
cat "$OUT/summary.md"
status=0
grep -q '^FAIL' "$OUT/summary.md" && status=1
rm -rf "$WORK"
exit $status
