#!/usr/bin/env bash
# Issue 13 on one H200, in one call: steady search on the matvec example with a replay latency of
# ten evaluations, SIGKILLed half-way and resumed; the busy fraction over the whole run.
# Run from the repository root with the release binary at $KACTORS:
#   OUT=/some/folder KACTORS=target/release/kactors bash scripts/h200/issue13.sh
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue13}
KACTORS=${KACTORS:-target/release/kactors}
COUNT=${COUNT:-48}
# PLATFORM=noop rehearses the whole script on a machine without a GPU.
PLATFORM=${PLATFORM:-nvidia}
if [ "$PLATFORM" = noop ]; then PROBE_PLATFORM=noop; else
    PROBE_PLATFORM="{verifier: $PLATFORM, benchmarker: $PLATFORM, worker_runner: $PLATFORM, profiler: noop}"; fi
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
WORK=$(mktemp -d)
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem,power.draw --format=csv || echo "no nvidia-smi"
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
} > "$OUT/machine.txt" 2>&1
python3 scripts/h200/matvec_variants.py examples/optimize_01_matvec "$WORK/kernel" "$COUNT"
mkdir -p "$WORK/configs"
finish() {
    tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='*.so' --exclude='*.cubin' --exclude='*.ncu-rep' -C "$WORK" runs 2>/dev/null
}

# 1. An evaluation's device time on this kernel: four candidates in one round, no profiler.
cat > "$WORK/configs/probe.yaml" <<YAML
platform: $PROBE_PLATFORM
provider: replay
num_workers: 1
max_rounds: 1
strategy_config: {num_top_kernels: 1, num_bottlenecks: 4}
YAML
timeout 150 "$KACTORS" run --strategy probe --config-dir "$WORK/configs" --kernel-dir "$WORK/kernel" \
    --run-dir "$WORK/runs/probe" > /dev/null 2> "$OUT/probe.stderr"
CODE=$?
echo "probe exit $CODE" >> "$OUT/probe.stderr"
[ "$CODE" -eq 0 ] || { echo "the probe run failed: see probe.stderr"; exit 1; }
EVAL_S=$(python3 - "$WORK/runs/probe" <<'PY'
import json, pathlib, statistics, sys
run = next(pathlib.Path(sys.argv[1]).iterdir())
seconds = [r["seconds"] for r in map(json.loads, (run / "journal.jsonl").read_text().splitlines())
           if r["type"] == "evaluated" and r["candidate"] > 0 and r.get("seconds")]
print(f"{statistics.median(seconds):.3f}" if seconds else "1.0")
PY
)
LATENCY_S=$(python3 -c "print(round(10 * $EVAL_S, 2))")
echo "median evaluation ${EVAL_S} s; replay latency ${LATENCY_S} s" | tee "$OUT/latency.txt"
finish

# 2. Steady search over COUNT candidates on one GPU, killed with SIGKILL once half of them are
#    evaluated, then resumed.
cat > "$WORK/configs/steady.yaml" <<YAML
platform: $PLATFORM
provider: replay
search: steady
num_workers: 1
replay_latency_s: $LATENCY_S
max_rounds: $((COUNT / 4))
strategy_config: {num_top_kernels: 2, num_bottlenecks: 2}
YAML
"$KACTORS" run --strategy steady --config-dir "$WORK/configs" --kernel-dir "$WORK/kernel" \
    --run-dir "$WORK/runs/steady" > /dev/null 2> "$OUT/first.stderr" &
PID=$!
HALF=$((COUNT / 2))
for _ in $(seq 1 1200); do
    kill -0 "$PID" 2>/dev/null || { echo "the steady run ended before half of it was evaluated"; cat "$OUT/first.stderr"; exit 1; }
    journal=$(ls "$WORK"/runs/steady/*/journal.jsonl 2>/dev/null | head -1)
    if [ -n "$journal" ] && [ "$(grep -c '"type":"evaluated"' "$journal")" -ge "$HALF" ]; then break; fi
    sleep 0.25
done
kill -KILL "$PID"
wait "$PID"
CODE=$?
echo "first process: SIGKILLed after $(grep -c '"type":"evaluated"' "$journal") evaluations (exit $CODE)" | tee "$OUT/kill.txt"
echo "its children left running:" >> "$OUT/kill.txt"
ps -eo pid,pgid,cmd | grep -E 'evaluator|ncu' | grep -v grep >> "$OUT/kill.txt"
finish
RUN=$(dirname "$journal")
timeout 400 "$KACTORS" resume "$RUN" > /dev/null 2> "$OUT/resume.stderr"
echo "resume exit $?" | tee -a "$OUT/kill.txt"
python3 scripts/h200/busy_fraction.py "$RUN" | tee "$OUT/busy.md"
grep '"type":"run_resumed"' "$RUN/journal.jsonl" > "$OUT/run_resumed.json"
"$KACTORS" report "$RUN" --out "$OUT/report" > /dev/null 2>> "$OUT/resume.stderr"
finish
