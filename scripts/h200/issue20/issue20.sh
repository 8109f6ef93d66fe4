#!/usr/bin/env bash
# Issue 20 (generation from a bare problem.py) on one H200, in one call of the device tool. Run
# from the repository root with the release binary at target/release/kactors (or $KACTORS):
#   OUT=/some/folder bash scripts/h200/issue20/issue20.sh
# Four runs, each a kernel directory holding only a problem.py of examples/kernelbench, with the
# replayed answers of replies.py: relu, layernorm and matmul (two seeds that pass, two rounds),
# and row_sum (one seed that fails twice and passes at its second refinement, two rounds). It
# leaves under $OUT: machine.txt, summary.md (the figures: time from `kactors run` to the first
# verified seed, and per seed), runs.tgz and logs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue20}
KACTORS=$(realpath "${KACTORS:-target/release/kactors}")
BUDGET_S=${BUDGET_S:-400}
HERE=scripts/h200/issue20
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT"
WORK=$(pwd)/.issue20-work
rm -rf "$WORK"
LOGS=$WORK/logs
RESULTS=$WORK/results.txt
mkdir -p "$LOGS" "$WORK/runs" "$WORK/configs" "$WORK/kernels"
: > "$RESULTS"
STARTED=$(date +%s)
. scripts/h200/budget.sh
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,memory.total,driver_version --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    "$KACTORS" --version
} > "$OUT/machine.txt" 2>&1
python3 "$HERE/replies.py" "$WORK/replies"

# generate NAME PROBLEM_FILE SEEDS WANTED_S
generate() {
    local name=$1 problem=$2 seeds=$3 wanted=$4
    mkdir -p "$WORK/kernels/$name" "$WORK/configs/$name"
    cp "$problem" "$WORK/kernels/$name/problem.py"
    sed -e "s|REPLAY_DIR|$WORK/replies/$name|" -e "s|NUM_SEEDS|$seeds|" "$HERE/generation.yaml" \
        > "$WORK/configs/$name/generation.yaml"
    timeout "$(allowed "$wanted")" "$KACTORS" run --strategy generation \
        --config-dir "$WORK/configs/$name" --kernel-dir "$WORK/kernels/$name" \
        --run-dir "$WORK/runs/$name" --json > "$LOGS/$name.events.jsonl" 2> "$LOGS/$name.stderr"
    echo "$name $?" >> "$WORK/exits.txt"
}

generate relu examples/kernelbench/level1/01_relu.py 2 120
generate layernorm examples/kernelbench/level1/03_layernorm.py 2 120
generate matmul examples/kernelbench/level1/04_matmul.py 2 120
generate row_sum examples/kernelbench/level1/02_row_sum.py 1 120

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
