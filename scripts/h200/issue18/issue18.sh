#!/usr/bin/env bash
# Issue 18 (a speedup that cannot be faked) on one H200, in one call of the device tool. Run from
# the repository root with the release binary at target/release/kactors (or $KACTORS) and the
# evaluator of before issue 18 at $OLD_TEMPLATES (default .h200/old-templates: `git archive
# fcb81aa templates | tar x -C .h200/old --strip-components=1` makes it):
#   OUT=/some/folder bash scripts/h200/issue18/issue18.sh
# It leaves under $OUT: machine.txt, summary.md (the PASS/FAIL lines, also printed last),
# searches.md (each adversarial search's table), cost.jsonl, runs.tgz, logs.tgz.
# Phases, about 7 minutes (a budget of 540 s is shared out):
#   1. the adversaries among honest matvecs, one search on the 4 GiB matvec (memos by content,
#      rings of 4 and 16, by address and sample; an unjoined and a joined side stream)
#   2. the same adversaries on a matvec of 8 MiB, where no floor can help
#   3. the softmax tolerance cheat beside an honest softmax
#   4. the examples' own searches (matvec, rmsnorm): the honest kernels alone, and each
#      example's best kernel as a share of the speed of light
#   5. the cost per candidate and the cheat, the evaluator of before and of now side by side
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue18}
KACTORS=${KACTORS:-target/release/kactors}
OLD_TEMPLATES=${OLD_TEMPLATES:-.h200/old-templates}
BUDGET_S=${BUDGET_S:-540}
HERE=scripts/h200/issue18
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT"
WORK=$(mktemp -d)
LOGS=$WORK/logs
RESULTS=$WORK/results.txt
mkdir -p "$LOGS" "$WORK/runs" "$WORK/configs"
: > "$RESULTS"
: > "$OUT/searches.md"
STARTED=$(date +%s)
. scripts/h200/budget.sh

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,memory.total,driver_version,clocks.max.sm --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
    "$KACTORS" --version
} > "$OUT/machine.txt" 2>&1

finish() {
    {
        echo "# Issue 18 on one H200: $(head -1 "$OUT/machine.txt")"
        echo
        echo '```'
        cat "$RESULTS"
        echo '```'
        echo
        cat "$OUT/searches.md"
    } > "$OUT/summary.md"
    tar czf "$OUT/logs.tgz" -C "$WORK" logs 2>/dev/null
    tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='scratch' --exclude='*.so' \
        --exclude='*.cubin' -C "$WORK" runs 2>/dev/null
}

# A kernel directory as the search sees it: the problem's files (input.py from INITIAL, when
# given) and a short test.py.
kernel_dir() {
    local name=$1 from=$2 initial=${3:-$2/input.py}
    mkdir -p "$WORK/kernels/$name"
    cp "$from/problem.py" "$WORK/kernels/$name/"
    grep -v '^# expect:' "$initial" > "$WORK/kernels/$name/input.py"
    cp "$HERE/quick_test.py" "$WORK/kernels/$name/test.py"
    echo "$WORK/kernels/$name"
}
# The matvec adversaries, written from the example's candidates.
python3 "$HERE/adversaries.py" "$WORK/candidates/matvec"
C=$WORK/candidates

# search NAME KERNEL_DIR REPLAY_DIR WANTED_S: one search of the replay folder's files in order.
search() {
    local name=$1 kernel=$2 replay=$3 wanted=$4
    sed "s|REPLAY_DIR|$replay|" "$HERE/adversary.yaml" > "$WORK/configs/adversary.yaml"
    timeout "$(allowed "$wanted")" "$KACTORS" run --strategy adversary --config-dir "$WORK/configs" \
        --kernel-dir "$kernel" --run-dir "$WORK/runs/$name" --json \
        > "$LOGS/$name.events.jsonl" 2> "$LOGS/$name.stderr"
    local status=$?
    [ "$status" = 0 ] || result "FAIL $name: kactors exited $status (logs/$name.stderr)"
    ls -d "$WORK/runs/$name"/*/ 2>/dev/null | head -1
}

checked() {
    local name=$1 run=$2 alone=${3:-}
    if [ -z "$run" ]; then
        result "FAIL $name: no run directory"
        return
    fi
    { echo "## $name"; echo; python3 "$HERE/check.py" "$run" $alone; echo; } > "$WORK/$name.md" 2> "$LOGS/$name.check.stderr"
    cat "$WORK/$name.md" >> "$OUT/searches.md"
    grep -E '^(PASS|FAIL) ' "$WORK/$name.md" | sed "s/^\(PASS\|FAIL\) /\1 $name: /" >> "$RESULTS"
    grep -E 'Speed of light|No speed of light|of the speed of light' "$run/report.md" | sed "s/^/    $name report: /" >> "$RESULTS"
}

# 4 first: the examples' own searches give the honest kernels' times alone.
matvec_example=$(search example-matvec "$(kernel_dir example-matvec examples/optimize_01_matvec)" \
    examples/optimize_01_matvec/candidates 150)
checked example-matvec "$matvec_example"
rmsnorm_example=$(search example-rmsnorm "$(kernel_dir example-rmsnorm examples/optimize_02_rmsnorm)" \
    examples/optimize_02_rmsnorm/candidates 100)
checked example-rmsnorm "$rmsnorm_example"
finish

# 1. The adversaries on the 4 GiB matvec.
matvec=$(kernel_dir matvec examples/optimize_01_matvec)
run=$(search adversaries-matvec "$matvec" "$C/matvec" 150)
checked adversaries-matvec "$run" "$matvec_example"
finish

# 2. The same on 8 MiB.
small=$(kernel_dir small "$HERE/small_matvec" "$C/matvec/00_honest_pipelined.py")
run=$(search adversaries-small "$small" "$C/matvec" 90)
checked adversaries-small "$run"
finish

# 3. The softmax cheat.
softmax=$(kernel_dir softmax "$HERE/softmax" "$HERE/candidates/softmax/00_honest_online_softmax.py")
run=$(search softmax "$softmax" "$HERE/candidates/softmax" 90)
checked softmax "$run"
finish

# 5. Before and now, side by side.
S=$HERE/candidates/softmax
timeout "$(allowed 150)" python3 "$HERE/cost.py" "$OLD_TEMPLATES/evaluator.py" templates/evaluator.py \
    "$WORK/cost" \
    "examples/optimize_01_matvec:$C/matvec/00_honest_pipelined.py,$C/matvec/07_honest_row_tiles.py" \
    "$small:$C/matvec/00_honest_pipelined.py" \
    "$softmax:$S/00_honest_online_softmax.py,$S/01_scaled_input_cheat.py" \
    > "$OUT/cost.jsonl" 2> "$LOGS/cost.stderr"
grep -E '^(PASS|FAIL) ' "$LOGS/cost.stderr" | sed 's/^\(PASS\|FAIL\) /\1 cost: /' >> "$RESULTS" \
    || result "FAIL cost: no verdict (logs/cost.stderr)"
finish

echo "elapsed $(($(date +%s) - STARTED)) s" >> "$RESULTS"
finish
cat "$RESULTS"
grep -q '^FAIL' "$RESULTS" && exit 1
exit 0
