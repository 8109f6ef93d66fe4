#!/usr/bin/env bash
# The H200 measurements of issue 4, in one call (the device tool lends the machine by the minute).
# Run from the repository root, with the release binary at target/release/kactors (or $KACTORS):
#   OUT=/some/folder bash scripts/h200/measure.sh
# It leaves under $OUT: machine.txt, summary.md (the README's figures), logs.tgz and runs.tgz.
set -uo pipefail
OUT=${OUT:-/tmp/kactors-measure}
KACTORS=${KACTORS:-target/release/kactors}
EXAMPLES=${EXAMPLES:-"optimize_01_matvec optimize_02_rmsnorm"}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
WORK=$(mktemp -d)
LOGS=$WORK/logs
mkdir -p "$LOGS" "$WORK/runs"
seconds() { python3 -c 'import time; print(f"{time.time():.3f}")'; }

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,clocks.sm,clocks.mem,power.draw --format=csv
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.version.cuda)'
    (ncu --version || /usr/local/cuda/bin/ncu --version) 2>&1 | tail -1
} > "$OUT/machine.txt" 2>&1

# The summary and the archives are remade after every phase, so a call cut short by its time
# limit still brings back what was measured.
finish() {
    python3 scripts/h200/summarize.py "$WORK" "$OUT/machine.txt" > "$OUT/summary.md" 2> "$LOGS/summarize.stderr"
    tar czf "$OUT/logs.tgz" -C "$WORK" logs
    tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='*.so' --exclude='*.cubin' -C "$WORK" runs
}
timed() {
    local record=$1
    shift
    local start
    start=$(seconds)
    "$@"
    echo "exit=$? wall_s=$(python3 -c "print(round($(seconds) - $start, 2))")" > "$record"
}
run_of() { ls -d "$WORK/runs/$1"/*/ | head -1; }

# 1. A whole kactors run per example, the replay provider serving the example's candidates;
#    ncu profiles each parent once.
for example in $EXAMPLES; do
    timed "$LOGS/$example.run" timeout 200 "$KACTORS" run --strategy nvidia --provider replay --max-rounds 2 \
        --kernel-dir "examples/$example" --run-dir "$WORK/runs/$example" --json \
        > "$LOGS/$example.events.jsonl" 2> "$LOGS/$example.stderr"
    finish
done

# 2. Initial, best, eager and torch.compile again in one fresh evaluator, interleaved; and the
#    copy bandwidth.
for example in $EXAMPLES; do
    run=$(run_of "$example")
    timeout 200 python3 scripts/h200/retime.py "$run/tools/evaluator.py" "$run/tools/aten_allowlist.yaml" \
        "examples/$example" "examples/$example/input.py" "$run/best_kernel.py" "$WORK/retime-$example" \
        > "$LOGS/$example.retime.json" 2> "$LOGS/$example.retime.stderr"
    finish
done

# 3. KernelAgent's way of checking one candidate, a fresh `python test.py`, for the initial and
#    the best kernel; and one plain run of the profile wrapper, to set against a profile's wall.
for example in $EXAMPLES; do
    run=$(run_of "$example")
    for which in initial best; do
        copy=$WORK/ka-$example-$which
        cp -r "examples/$example" "$copy"
        rm -rf "$copy/candidates"
        [ "$which" = best ] && cp "$run/best_kernel.py" "$copy/kernel.py"
        (cd "$copy" && timed "$LOGS/$example.test-$which" timeout 90 python3 test.py > "$LOGS/$example.test-$which.log" 2>&1)
    done
    timed "$LOGS/$example.wrapper" timeout 90 python3 templates/profile_wrapper.py --kernel-dir "examples/$example" \
        --candidate "examples/$example/input.py" --kernels-out "$LOGS/$example.kernels.json" \
        --config '{"warmup_calls": 3, "seed": 0}' > "$LOGS/$example.wrapper.log" 2>&1
    finish
done
cat "$OUT/summary.md"
