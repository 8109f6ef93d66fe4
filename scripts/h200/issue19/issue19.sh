#!/usr/bin/env bash
# Issue 19 (candidate code in a sandbox) on one H200, in one call of the device tool. Run from
# the repository root with the release binary at target/release/kactors (or $KACTORS):
#   OUT=/some/folder bash scripts/h200/issue19/issue19.sh
# It leaves under $OUT: machine.txt, probe.json (what the sandbox gets here), check.txt
# (`kactors check`), start.txt (the launcher's cost), summary.md (the PASS/FAIL lines, also
# printed last), runs.tgz and logs.tgz. Its work folder lies outside /tmp, so that the sandbox
# gives its children a private /tmp, as on a user's machine. Phases, about 4 minutes:
#   1. what the sandbox gets (the probe and `kactors check`), and what starting a CUDA process
#      through the launcher costs, against starting it plainly
#   2. the tampering candidates (tests/sandbox.rs's attacks, each in front of an honest matvec)
#      with API keys in kactors' environment and listeners on TCP and UDP
#   3. the honest matvecs with the sandbox and without, profiled by ncu: their times and the
#      cost per candidate side by side
set -uo pipefail
OUT=${OUT:-/tmp/kactors-issue19}
KACTORS=$(realpath "${KACTORS:-target/release/kactors}")
BUDGET_S=${BUDGET_S:-300}
HERE=scripts/h200/issue19
ISSUE18=scripts/h200/issue18
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
KEY=sk-issue19-never-in-a-candidate
export OPENAI_API_KEY=$KEY ANTHROPIC_API_KEY=$KEY HF_TOKEN=$KEY
mkdir -p "$OUT"
WORK=$(pwd)/.issue19-work
rm -rf "$WORK"
LOGS=$WORK/logs
RESULTS=$WORK/results.txt
mkdir -p "$LOGS" "$WORK/runs" "$WORK/configs" "$WORK/home"
: > "$RESULTS"
: > "$OUT/tables.md"
STARTED=$(date +%s)
. scripts/h200/budget.sh

{
    date -u +%Y-%m-%dT%H:%M:%SZ
    uname -r
    nvidia-smi --query-gpu=name,uuid,memory.total,driver_version --format=csv
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    "$KACTORS" --version
    id
} > "$OUT/machine.txt" 2>&1

finish() {
    {
        echo "# Issue 19 on one H200: $(head -1 "$OUT/machine.txt")"
        echo
        echo '```'
        cat "$RESULTS"
        echo '```'
        echo
        cat "$OUT/tables.md"
    } > "$OUT/summary.md"
    tar czf "$OUT/logs.tgz" -C "$WORK" logs 2>/dev/null
    tar czf "$OUT/runs.tgz" --exclude='triton-cache' --exclude='scratch' --exclude='*.cubin' \
        --exclude='*.ncu-rep' -C "$WORK" runs 2>/dev/null
}

# 1. The probe, the check, the launcher's cost (PHASES=23 leaves them out).
PHASES=${PHASES:-123}
if [[ $PHASES == *1* ]]; then
mkdir -p "$WORK/probe"
"$KACTORS" sandbox-exec --level best-effort --scratch "$WORK/probe/scratch" --scratch-bytes 1073741824 \
    --max-tasks 4096 --max-file-bytes 8589934592 --writable "$WORK/probe" --hide "$WORK/probe" --probe \
    > "$OUT/probe.json" 2> "$LOGS/probe.stderr"
python3 -c "import json,sys; steps=json.load(open(sys.argv[1]))['steps']; bad=[s for s in steps if not s['ok']]; print('PASS every mechanism available' if not bad else f'FAIL mechanisms missing: {bad}')" \
    "$OUT/probe.json" >> "$RESULTS" 2>&1
"$KACTORS" check --strategy nvidia --kernel-dir examples/optimize_01_matvec > "$OUT/check.txt" 2>&1
grep -q '^FAIL sandbox' "$OUT/check.txt" && result "FAIL check: a sandbox line failed (check.txt)" \
    || result "PASS check: $(grep -c '^ok sandbox' "$OUT/check.txt") sandbox lines ok"
python3 - "$KACTORS" "$WORK/start" > "$OUT/start.txt" 2>&1 <<'PY'
import statistics, subprocess, sys, time, os
kactors, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
code = "import torch; torch.ones(1, device='cuda').sum().item()"
sandbox = [kactors, "sandbox-exec", "--level", "required", "--scratch", f"{work}/scratch",
           "--scratch-bytes", str(1 << 30), "--max-tasks", "4096", "--max-file-bytes", str(8 << 30),
           "--writable", work, "--hide", work, "--"]
def once(prefix):
    began = time.perf_counter()
    subprocess.run(prefix + ["python3", "-c", code], check=True)
    return time.perf_counter() - began
plain, boxed = [], []
for _ in range(5):
    plain.append(once([]))
    boxed.append(once(sandbox))
extra = statistics.median(b - p for b, p in zip(boxed, plain))
print(f"plain median {statistics.median(plain):.3f} s, sandboxed median {statistics.median(boxed):.3f} s")
print(("PASS" if extra <= 0.05 else "FAIL") + f" start: a CUDA process through the launcher costs {extra * 1000:+.0f} ms (median of 5 pairs; goal at most 50 ms)")
PY
grep -E '^(PASS|FAIL) ' "$OUT/start.txt" >> "$RESULTS" || result "FAIL start: no figure (start.txt)"
finish
fi

# A kernel directory: the small matvec of issue 18 (8 MiB) with its honest kernel and test.py.
kernel=$WORK/kernels/small
mkdir -p "$kernel"
cp "$ISSUE18/small_matvec/problem.py" "$kernel/"
cp "$ISSUE18/quick_test.py" "$kernel/test.py"
python3 "$ISSUE18/adversaries.py" "$WORK/candidates/matvec" > /dev/null
grep -v '^# expect:' "$WORK/candidates/matvec/00_honest_pipelined.py" > "$kernel/input.py"
# The honest candidates of the matvec example, each different from input.py and from each other,
# so that every one is compiled, verified and timed (a duplicate would be skipped).
mkdir -p "$WORK/candidates/honest"
cp examples/optimize_01_matvec/candidates/0[1-4]_*.py "$WORK/candidates/honest/"

# search NAME REPLAY SANDBOX PROFILER WANTED_S
search() {
    local name=$1 replay=$2 sandbox=$3 profiler=$4 wanted=$5
    sed -e "s|REPLAY_DIR|$replay|" -e "s|SANDBOX|$sandbox|" -e "s|PROFILER|$profiler|" \
        "$HERE/sandbox.yaml" > "$WORK/configs/sandboxed.yaml"
    HOME=$WORK/home timeout "$(allowed "$wanted")" "$KACTORS" run --strategy sandboxed \
        --config-dir "$WORK/configs" --kernel-dir "$kernel" --run-dir "$WORK/runs/$name" --json \
        > "$LOGS/$name.events.jsonl" 2> "$LOGS/$name.stderr"
    local status=$?
    [ "$status" = 0 ] || result "FAIL $name: kactors exited $status (logs/$name.stderr)"
    ls -d "$WORK/runs/$name"/*/ 2>/dev/null | head -1
}

# 2. The tampering candidates, with listeners that record whatever reaches them.
if [[ $PHASES == *2* ]]; then
python3 - "$WORK/ports" "$WORK/reached" <<'PY' &
import socket, sys, threading
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
open(sys.argv[2], "w").close()
open(sys.argv[1], "w").write(f"{tcp.getsockname()[1]} {udp.getsockname()[1]}\n")
def record(what):
    with open(sys.argv[2], "a") as f:
        f.write(what + "\n")
threading.Thread(target=lambda: [record(f"udp {udp.recvfrom(256)}") for _ in iter(int, 1)], daemon=True).start()
while True:
    connection, peer = tcp.accept()
    record(f"tcp from {peer}: {connection.recv(256)!r}")
PY
LISTENERS=$!
while [ ! -s "$WORK/ports" ]; do sleep 0.1; done
read -r TCP_PORT UDP_PORT < "$WORK/ports"
PTH=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/kactors_issue19.pth
python3 "$HERE/attacks.py" "$WORK/candidates/attacks" "$WORK/candidates/matvec/00_honest_pipelined.py" \
    "$WORK/runs/attacks" "$kernel" "$TCP_PORT" "$UDP_PORT" "$KEY" "$PTH"
run=$(search attacks "$WORK/candidates/attacks" required noop 120)
kill "$LISTENERS" 2>/dev/null
if [ -n "$run" ]; then
    { echo "## The tampering candidates"; echo; python3 "$HERE/check.py" attacks "$run" "$WORK/reached" "$PTH" "$kernel" "$WORK/home"; echo; } \
        > "$WORK/attacks.md" 2> "$LOGS/attacks.check.stderr"
    cat "$WORK/attacks.md" >> "$OUT/tables.md"
    grep -E '^(PASS|FAIL) ' "$WORK/attacks.md" | sed 's/^\(PASS\|FAIL\) /\1 attacks: /' >> "$RESULTS"
else
    result "FAIL attacks: no run directory"
fi
rm -f "$PTH"
finish
fi

# 3. The honest kernels with the sandbox and without, each search profiled by ncu, in the order
# sandboxed, unsandboxed, unsandboxed, sandboxed: a drift over the call (warming caches, clocks)
# falls on both sides alike.
if [[ $PHASES == *3* ]]; then
boxed=$(search sandboxed "$WORK/candidates/honest" required nvidia 90)
plain=$(search unsandboxed "$WORK/candidates/honest" off nvidia 90)
plain2=$(search unsandboxed2 "$WORK/candidates/honest" off nvidia 90)
boxed2=$(search sandboxed2 "$WORK/candidates/honest" required nvidia 90)
if [ -n "$boxed" ] && [ -n "$plain" ] && [ -n "$plain2" ] && [ -n "$boxed2" ]; then
    { echo "## Honest kernels with and without the sandbox"; echo; python3 "$HERE/check.py" compare "$boxed,$boxed2" "$plain,$plain2"; echo; } \
        > "$WORK/compare.md" 2> "$LOGS/compare.check.stderr"
    cat "$WORK/compare.md" >> "$OUT/tables.md"
    grep -E '^(PASS|FAIL|INFO) ' "$WORK/compare.md" | sed 's/^\(PASS\|FAIL\|INFO\) /\1 honest: /' >> "$RESULTS"
else
    result "FAIL honest: a search left no run directory"
fi
fi

echo "elapsed $(($(date +%s) - STARTED)) s" >> "$RESULTS"
finish
cat "$RESULTS"
status=0
grep -q '^FAIL' "$RESULTS" && status=1
rm -rf "$WORK"
exit $status
