#!/usr/bin/env bash
# The probes of issues 18 and 19 on the H200, in one call: OUT=... bash scripts/h200/probe/run.sh
set -u
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
{
uname -r; id; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
grep -i profiling /proc/driver/nvidia/params
which unshare bwrap ncu python3
echo "== streams"; timeout 120 python3 streams.py
echo "== issue 18 evaluator"; (cd ../../.. && python3 scripts/h200/issue18/adversaries.py /tmp/adv && C=/tmp/adv && timeout 240 python3 scripts/h200/issue18/evaluate.py templates/evaluator.py examples/optimize_01_matvec /tmp/i18 $C/00_honest_pipelined.py $C/01_memo_content_ring4.py $C/03_memo_address_and_sample.py $C/04_race_unjoined.py $C/05_joined_side_stream.py | cut -c1-1500; tail -30 /tmp/i18/evaluator/evaluator.log)
echo "== landlock + cuda"; timeout 120 python3 landlock_cuda.py /tmp/ll-probe
echo "== userns+pidns+netns: cuda, /proc"
timeout 120 unshare -Urn --pid --fork --mount-proc python3 -c 'import os, torch; print("cuda", torch.ones(4, device="cuda").sum().item(), "pids", [p for p in os.listdir("/proc") if p.isdigit()])'
cat > /tmp/tiny.py <<'PY'
import torch
x = torch.randn(1 << 24, device="cuda"); torch.cuda.synchronize()
torch.cuda.profiler.start(); y = x * 2; torch.cuda.synchronize(); torch.cuda.profiler.stop()
PY
echo "== ncu inside userns"
timeout 180 unshare -Urn --pid --fork --mount-proc ncu --clock-control none --profile-from-start off --metrics dram__bytes_read.sum,gpu__time_duration.sum --csv python3 /tmp/tiny.py 2>&1 | tail -4
echo "== ncu outside, target inside"
timeout 180 ncu --target-processes all --clock-control none --profile-from-start off --metrics dram__bytes_read.sum --csv unshare -Urn --pid --fork --mount-proc python3 /tmp/tiny.py 2>&1 | tail -4
} 2>&1 | tee "${OUT:-/tmp}/probe.txt"
