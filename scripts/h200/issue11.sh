#!/usr/bin/env bash
# Issue 11 (one candidate never changes another's verdict or time) and issue 10's memory item on
# one H200, in one call of the device tool. Run from the repository root, with the release
# binary at target/release/kactors (or $KACTORS):
#   OUT=/some/folder bash scripts/h200/issue11.sh
# It leaves under $OUT (7 files): machine.txt, summary.md (the PASS/FAIL table, also printed
# last), tamper.md (the tamper run's table), overhead.jsonl, memory.json, runs.tgz, logs.tgz.
# Phases, about 6 minutes in all (a budget of 500 s is shared out so that it ends within 8):
#   1. the tamper run: kactors run --strategy tamper (scripts/h200/tamper/), then tamper_check.py
#   2. a memory cap that leaves room for no two draws: the run must refuse to start (exit 2)
#   3. a memory cap that leaves room for two draws of three: the evaluator keeps two
#   4. the audit's cost, with and without, side by side (integrity_overhead.py)
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue11}
KACTORS=${KACTORS:-target/release/kactors}
BUDGET_S=${BUDGET_S:-500}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
WORK=$(mktemp -d)
LOGS=$WORK/logs
RESULTS=$WORK/results.txt
mkdir -p "$LOGS" "$WORK/runs"
: > "$RESULTS"
STARTED=$(date +%s)
. scripts/h200/budget.sh

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,memory.total,driver_version --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
    git log --oneline -1
} > "$OUT/machine.txt" 2>&1

finish() {
    {
        echo "# Issue 11 on one H200: $(head -1 "$OUT/machine.txt")"
        echo
        echo '```'
        cat "$RESULTS"
        echo '```'
        echo
        echo "## The tamper run"
        echo
        cat "$OUT/tamper.md" 2>/dev/null
    } > "$OUT/summary.md"
    tar czf "$OUT/logs.tgz" -C "$WORK" logs
    tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='tc' --exclude='*.so' --exclude='*.cubin' -C "$WORK" runs overhead 2>/dev/null
}

# 1. The tamper run.
timeout "$(allowed 270)" "$KACTORS" run --strategy tamper --config-dir scripts/h200/tamper \
    --kernel-dir examples/optimize_01_matvec --run-dir "$WORK/runs/tamper" --json \
    > "$LOGS/tamper.events.jsonl" 2> "$LOGS/tamper.stderr"
status=$?
[ "$status" = 0 ] && result "PASS tamper run ended as planned (exit 0)" || result "FAIL tamper run: exit $status (logs/tamper.stderr)"
run=$(ls -d "$WORK"/runs/tamper/*/ 2>/dev/null | head -1)
if [ -n "$run" ]; then
    python3 scripts/h200/tamper_check.py "$run" > "$OUT/tamper.md" 2> "$LOGS/tamper_check.stderr"
    grep -E '^(PASS|FAIL) ' "$OUT/tamper.md" >> "$RESULTS"
else
    result "FAIL tamper run: no run directory"
fi
finish

# 2. Not even two draws fit: 16 GiB holds the first draw (12 GiB at its peak), not two.
KACTORS_EVALUATOR_MEMORY_CAP_GIB=16 timeout "$(allowed 90)" "$KACTORS" run --strategy tamper \
    --config-dir scripts/h200/tamper --kernel-dir examples/optimize_01_matvec \
    --run-dir "$WORK/runs/nofit" > "$LOGS/nofit.stdout" 2> "$LOGS/nofit.stderr"
status=$?
message=$(grep -o "the problem's inputs do not fit on [^:]*: [0-9.]* GiB needed, [0-9.]* GiB free" "$LOGS/nofit.stderr" | head -1)
if [ "$status" = 2 ] && [ -n "$message" ]; then
    result "PASS memory capped at 16 GiB: exit 2, \"$message\""
else
    result "FAIL memory capped at 16 GiB: exit $status, message '${message}' (logs/nofit.stderr)"
fi
finish

# 3. Two draws fit, three do not: 25 GiB.
timeout "$(allowed 120)" python3 scripts/h200/integrity_overhead.py memory templates/evaluator.py \
    data/aten_allowlist.yaml "$WORK/overhead" examples/optimize_01_matvec 25 \
    > "$OUT/memory.json" 2> "$LOGS/memory.stderr" || true
grep -E '^(PASS|FAIL) ' "$LOGS/memory.stderr" >> "$RESULTS" || result "FAIL memory capped at 25 GiB: no verdict (logs/memory.stderr)"
finish

# 4. The audit's cost per candidate, side by side.
timeout "$(allowed 240)" python3 scripts/h200/integrity_overhead.py overhead templates/evaluator.py \
    data/aten_allowlist.yaml "$WORK/overhead" examples/optimize_01_matvec examples/optimize_02_rmsnorm \
    > "$OUT/overhead.jsonl" 2> "$LOGS/overhead.stderr" || true
grep -E '^(PASS|FAIL) ' "$LOGS/overhead.stderr" >> "$RESULTS" || result "FAIL overhead: no verdict (logs/overhead.stderr)"
grep -c '"kernel_dir"' "$OUT/overhead.jsonl" | grep -q '^2$' || result "FAIL overhead: not both examples measured (logs/overhead.stderr)"
finish

echo "elapsed $(($(date +%s) - STARTED)) s"
echo
cat "$RESULTS"
grep -q '^FAIL' "$RESULTS" && exit 1
exit 0
