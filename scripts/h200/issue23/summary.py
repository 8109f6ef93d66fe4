#!/usr/bin/env python3
"""Issue 23's figures from the runs' journals (scripts/h200/issue23/issue23.sh): per run, the
first LLM request's seconds after the process was launched, the start-up's steps, each
profile's device time, the device time per candidate, the busy fraction
(scripts/h200/busy_fraction.py) and the duplicates of both kinds; one `PASS`/`FAIL` line per
check of the new binary's runs.

    python3 summary.py RUNS_DIR EXITS_FILE

EXITS_FILE: a line per run, `NAME EXIT_CODE LAUNCHED` (LAUNCHED: the epoch seconds at which
the script started the process; the journal's first stamp comes only after the preflight).
"""

import statistics
import subprocess
import sys
from datetime import datetime
from pathlib import Path

BUSY = Path(__file__).resolve().parents[1] / "busy_fraction.py"
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from journal_spans import records_of  # noqa: E402


def when(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def verdict(ok, what, why=""):
    print(f"PASS {what}" if ok else f"FAIL {what}: {why}")


def startup(records, launched):
    """([(step, from_s, to_s)], first request s): the first process's start-up, in seconds
    after the process was launched."""
    origin = launched
    steps = [(r["step"], when(r["started"]) - origin, when(r["ended"]) - origin)
             for r in records if r["type"] == "startup_step"]
    spans = {}
    for r in records:
        if r["type"] == "run_resumed":
            break
        if r["type"] in ("step_started", "step_finished") and r.get("candidate") == 0:
            span = spans.setdefault(r["step"], [None, None])
            at = when(r["t"]) - origin
            if r["type"] == "step_started" and span[0] is None:
                span[0] = at
            elif r["type"] == "step_finished" and (span[1] is None or r["step"] == "reference"):
                span[1] = at
    for name in ("verify", "time", "profile", "reference"):
        if name in spans:
            steps.append((f"initial {name}" if name != "reference" else "references", *spans[name]))
    first = next((when(r["t"]) - origin for r in records
                  if r["type"] in ("analysis_requested", "proposal_requested")), None)
    return steps, first


def seconds(value):
    return "–" if value is None else f"{value:.1f}"


def profiles(records):
    """The device seconds of each profile step, from its step_started to its step_finished."""
    started, spans = {}, []
    for r in records:
        if r.get("step") != "profile":
            continue
        key = (r.get("candidate"), r.get("device"))
        if r["type"] == "step_started":
            started[key] = when(r["t"])
        elif r["type"] == "step_finished" and key in started:
            spans.append(when(r["t"]) - started.pop(key))
    return spans


def summarize(name, run, exit_code, launched):
    records = records_of(run)
    steps, first = startup(records, launched)
    print(f"## {name}\n")
    print(f"- exit {exit_code}; first LLM request {seconds(first)} s after the process was launched "
          f"(run_started {when(records[0]['t']) - launched:.1f} s after)")
    spans = profiles(records)
    if spans:
        print(f"- profiles: {len(spans)}, device seconds each: " + ", ".join(f"{s:.1f}" for s in spans))
    print("\n| start-up step | from (s) | to (s) |\n|---|---:|---:|")
    for step, start, end in steps:
        print(f"| {step} | {seconds(start)} | {seconds(end)} |")
    evaluated = [r for r in records if r["type"] == "evaluated" and r["candidate"] > 0 and r.get("seconds")]
    device = [r["seconds"] for r in evaluated]
    timed = {r["candidate"] for r in records if r["type"] == "step_started" and r["step"] == "time"}
    if device:
        print(f"\n- device time per candidate: median {statistics.median(device):.2f} s, mean "
              f"{statistics.mean(device):.2f} s over {len(device)} evaluations; {len(timed - {0})} timed")
    finished = [r for r in records if r["type"] == "candidate_finished" and r.get("duplicate_of") is not None]
    compiled = [r for r in finished if (r.get("reason") or "").startswith("same compiled code")]
    tokens = [r for r in finished if r not in compiled]
    pairs = ", ".join("{} of {}".format(r["candidate"], r["duplicate_of"]) for r in compiled)
    print(f"- duplicates: {len(tokens)} by tokens, {len(compiled)} by compiled code ({pairs or 'none'})")
    busy = subprocess.run([sys.executable, str(BUSY), str(run)], capture_output=True, text=True)
    print("\n" + (busy.stdout.strip() or busy.stderr.strip()) + "\n")
    if name.startswith("new"):
        references = next((when(r["t"]) for r in records
                           if r["type"] == "step_started" and r["step"] == "reference"), None)
        first_at = next((when(r["t"]) for r in records
                         if r["type"] in ("analysis_requested", "proposal_requested")), None)
        verdict(exit_code == 0, f"{name}: kactors exited 0", f"exit {exit_code}")
        verdict(first_at is not None and (references is None or first_at <= references),
                f"{name}: the first request went out before the references were timed")
        verdict(any(r["candidate"] == 2 for r in compiled), f"{name}: 01a (renamed) is a compiled duplicate of 01",
                [(r["candidate"], r.get("reason")) for r in finished])
        print(f"- 01b (renamed, two lines swapped): {'a compiled duplicate' if any(r['candidate'] == 3 for r in compiled) else 'timed: its compiled code differs'}")
        verdict(not (timed & {r["candidate"] for r in compiled}),
                f"{name}: no compiled duplicate was timed", sorted(timed))
    print()


def main(runs, exits):
    runs_launched = [line.split() for line in Path(exits).read_text().splitlines() if line.strip()]
    print("# Issue 23: start-up order, profiles, device time, busy fraction, compiled duplicates\n")
    for name, code, launched in runs_launched:
        found = sorted((Path(runs) / name).glob("*/journal.jsonl"))
        if not found:
            print(f"## {name}\n\nFAIL {name}: no journal (exit {code})\n")
            continue
        summarize(name, found[0].parent, int(code), float(launched))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
