#!/usr/bin/env bash
# Issue 12 on one H200: the call the profiler measures is the call the evaluator verified. Run
# from the repository root, with the release binary at target/release/kactors (or $KACTORS):
#   OUT=/some/folder bash scripts/h200/profiled_call.sh
# The candidate (scripts/h200/profiled_call/kernel/input.py, a weighted RMS norm) is
#   kernel_function(x, weight, /, eps)
# weight a positional-only parameter and eps a plain one, both bound from the model's attributes
# (kernel_call.py: weight by position, eps by name). Before issue 12 the evaluator refused this
# signature and the wrapper passed weight by name.
#   1. kactors run (scripts/h200/profiled_call/profiled_call.yaml): the evaluator verifies and
#      times the candidate, then Nsight Compute profiles it through the wrapper as round 1's
#      parent; about a minute.
#   2. kactors profile: the same wrapper as the command runs it; about 15 s.
# Both run with KACTORS_KERNEL_CALL_RECORD set: kernel_call.py appends the arguments of the
# evaluator's verified call (draw 0) and of each wrapper process's measured call to a file,
# each tensor by dtype, shape, strides, device and a SHA-256 of its bytes. compare.py then checks
# that every measured call got exactly the verified call's arguments.
# It leaves under $OUT: results.txt (the PASS/FAIL lines, also printed last), machine.txt,
# run.calls.jsonl, profile.calls.jsonl, profile.json, logs/ and run.tgz (the run directory
# without Triton caches). Under 3 minutes: the run gets 110 s, the profile 50 s.
set -uo pipefail
OUT=${OUT:-/tmp/kactors-profiled-call}
KACTORS=${KACTORS:-target/release/kactors}
HERE=scripts/h200/profiled_call
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/logs"
LOGS=$OUT/logs
RESULTS=$OUT/results.txt
: > "$RESULTS"
WORK=$(mktemp -d)
STARTED=$(date +%s)
result() { echo "$1" >> "$RESULTS"; }
# The last lines of a log, on one line, for a FAIL line.
ends() { tail -n 4 "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-400; }
# kactors_step WHAT RECORD SECONDS STDOUT COMMAND...: `kactors COMMAND` on the candidate, within
# SECONDS, kernel_call.py recording its calls to RECORD, stdout to STDOUT, stderr to
# logs/WHAT.stderr; then its PASS or FAIL line.
kactors_step() {
    local what=$1 record=$2 seconds=$3 stdout=$4
    shift 4
    KACTORS_KERNEL_CALL_RECORD="$record" timeout -k 10 "$seconds" "$KACTORS" "$@" \
        --strategy profiled_call --config-dir "$HERE" --kernel-dir "$WORK/kernel" \
        > "$stdout" 2> "$LOGS/$what.stderr"
    local status=$?
    if [ "$status" = 0 ]; then
        result "PASS kactors $what ended as planned (exit 0)"
    else
        result "FAIL kactors $what: exit $status; logs/$what.stderr: $(ends "$LOGS/$what.stderr")"
    fi
}
finish() {
    echo "elapsed $(($(date +%s) - STARTED)) s"
    echo
    cat "$RESULTS"
    grep -q '^FAIL' "$RESULTS" && exit 1
    exit 0
}

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,memory.total,driver_version --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
    git log --oneline -1
} > "$OUT/machine.txt" 2>&1

if [ ! -x "$KACTORS" ]; then
    result "FAIL no kactors binary at $KACTORS: build it (cargo build --release) or set KACTORS"
    finish
fi
cp -r "$HERE/kernel" "$WORK/kernel"
rm -f "$OUT/run.calls.jsonl" "$OUT/profile.calls.jsonl"

# 1. The run: verified by the evaluator, profiled through the wrapper.
kactors_step run "$OUT/run.calls.jsonl" 110 "$LOGS/run.events.jsonl" \
    run --run-dir "$WORK/runs" --json
run=$(ls -d "$WORK"/runs/*/ 2>/dev/null | head -1)
if [ -n "$run" ]; then
    tar czf "$OUT/run.tgz" --exclude='triton-cache' --exclude='*.so' --exclude='*.cubin' \
        -C "$run" . 2>/dev/null
else
    result "FAIL kactors run made no run directory; logs/run.stderr: $(ends "$LOGS/run.stderr")"
    run=$WORK/no-run
fi

# 2. kactors profile: the wrapper alone, on the device the run has given back.
kactors_step profile "$OUT/profile.calls.jsonl" 50 "$OUT/profile.json" \
    profile --run-dir "$WORK/profile" --json
for log in "$WORK"/profile/*/profile/*/*.log "$run"devices/*/evaluator.log; do
    [ -f "$log" ] && cp "$log" "$LOGS/$(echo "${log#"$WORK"/}" | tr '/' '_')"
done

# 3. The verified call against every measured one.
python3 "$HERE/compare.py" "$HERE/kernel/input.py" "$run" "$OUT/run.calls.jsonl" \
    "$OUT/profile.json" "$OUT/profile.calls.jsonl" > "$LOGS/compare.out" 2> "$LOGS/compare.stderr"
grep -E '^(PASS|FAIL) ' "$LOGS/compare.out" >> "$RESULTS"
grep -qE '^(PASS|FAIL) ' "$LOGS/compare.out" \
    || result "FAIL compare.py gave no verdict; logs/compare.stderr: $(ends "$LOGS/compare.stderr")"
rm -rf "$WORK"
finish
