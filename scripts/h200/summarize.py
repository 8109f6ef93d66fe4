"""Turns measure.sh's logs into the README's tables. usage: summarize.py WORK MACHINE_TXT"""

import json
import re
import sys
from datetime import datetime
from pathlib import Path

work, machine = Path(sys.argv[1]), Path(sys.argv[2])
logs = work / "logs"
WARMUP = 25


def read_kv(path):
    text = path.read_text() if path.exists() else ""
    return dict(part.split("=", 1) for part in text.split())


def stamp(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def journal(run):
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


def evaluator_exchanges(run):
    """(request, reply) pairs from kactors.log, per device in order."""
    pending, pairs = {}, []
    pattern = re.compile(r"evaluator (request|reply): (\{.*\}) device=(\d+)")
    for line in (run / "kactors.log").read_text().splitlines():
        match = pattern.search(line)
        if not match:
            continue
        kind, body, device = match.group(1), json.loads(match.group(2)), int(match.group(3))
        if kind == "request":
            pending[device] = body
        elif device in pending:
            pairs.append((pending.pop(device), body))
    return pairs


def candidate_of(path):
    match = re.search(r"/candidates/(\d+)/kernel\.py$", path)
    return int(match.group(1)) if match else None


print(f"Machine and date:\n\n```\n{machine.read_text().strip()}\n```\n")
for run_parent in sorted((work / "runs").iterdir()):
    example = run_parent.name
    runs = sorted(run_parent.iterdir())
    if not runs:
        print(f"## {example}: no run directory\n")
        continue
    run = runs[0]
    records = journal(run)
    steps, names = {}, {}
    for record in records:
        if record["type"] in ("step_started", "step_finished"):
            key = (record["candidate"], record["step"])
            steps.setdefault(key, {})[record["type"]] = stamp(record["t"])
        if record["type"] == "candidate_finished":
            names[record["candidate"]] = record
    overhead = {}
    for request, reply in evaluator_exchanges(run):
        candidate = candidate_of(request.get("candidate", ""))
        if candidate is None or not reply.get("ok"):
            continue
        if request["op"] == "verify" and reply.get("compile_s") is not None:
            overhead.setdefault(candidate, {})["verify"] = reply["seconds"] - reply["compile_s"] - (reply.get("run_s") or 0)
            overhead[candidate]["compile"] = reply["compile_s"]
        if request["op"] == "time" and reply.get("median_ms"):
            runs_s = (WARMUP + reply["samples"]) * reply["median_ms"] / 1e3
            overhead.setdefault(candidate, {})["time"] = reply["seconds"] - runs_s
    run_info = read_kv(logs / f"{example}.run")
    finished = [r for r in records if r["type"] == "run_finished"]
    print(f"## {example}\n")
    print(f"`kactors run --strategy nvidia --provider replay --kernel-dir examples/{example}`: {run_info}; "
          f"{finished[-1]['reason'] if finished else 'no run_finished record'}\n")
    print("| candidate | source | verdict | time (ms) | verify (s) | time step (s) | check-and-time (s) | Triton compile (s) | evaluator overhead (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for candidate in sorted(names):
        record = names[candidate]
        verify = steps.get((candidate, "verify"), {})
        timing = steps.get((candidate, "time"), {})
        verify_s = verify.get("step_finished", 0) - verify.get("step_started", 0) if len(verify) == 2 else None
        time_s = timing.get("step_finished", 0) - timing.get("step_started", 0) if len(timing) == 2 else None
        total = (verify_s or 0) + (time_s or 0)
        extra = overhead.get(candidate, {})
        own = extra.get("verify", 0) + extra.get("time", 0) if extra else None
        reply_path = run / "candidates" / str(candidate) / "reply.md"
        source = "input.py"
        if reply_path.exists():
            first = reply_path.read_text().splitlines()[0]
            source = first.replace("Replayed from ", "").rstrip(".")
        verdict = "passed" if record["passed"] else f"failed: {(record.get('reason') or '')[:70]}"
        fmt = lambda v: "–" if v is None else f"{v:.2f}"
        ms = "–" if record.get("time_ms") is None else f"{record['time_ms']:.4f}"
        print(f"| {candidate} | {source} | {verdict} | {ms} | {fmt(verify_s)} | {fmt(time_s)} | {fmt(total)} | {fmt(extra.get('compile'))} | {fmt(own)} |")
    print()
    profiles = [(k, v) for k, v in steps.items() if k[1] == "profile" and len(v) == 2]
    for (candidate, _), span in profiles:
        print(f"- ncu profile of candidate {candidate}: {span['step_finished'] - span['step_started']:.1f} s wall")
    print(f"- one plain run of the profile wrapper: {read_kv(logs / f'{example}.wrapper')}")
    for which in ("initial", "best"):
        print(f"- KernelAgent's way, a fresh `python test.py` of the {which} kernel: {read_kv(logs / f'{example}.test-{which}')}")
    retime_path = logs / f"{example}.retime.json"
    if retime_path.exists() and retime_path.read_text().strip():
        retime = json.loads(retime_path.read_text())
        print(f"- copy bandwidth (read + write): {retime.get('copy_bandwidth_gbps', 0):.0f} GB/s")
        print("\nRe-timed in one fresh evaluator, interleaved, two passes (median ms):\n")
        print("| pass | initial | best | eager | torch.compile |\n|---|---|---|---|---|")
        for number, timings in enumerate(retime["passes"], 1):
            cell = lambda name: f"{timings[name]['median_ms']:.4f}" if timings.get(name, {}).get("median_ms") else str(timings.get(name, {}).get("reason") or timings.get(name, {}).get("error"))[:60]
            print(f"| {number} | {cell('initial')} | {cell('best')} | {cell('eager')} | {cell('compile')} |")
    print()
