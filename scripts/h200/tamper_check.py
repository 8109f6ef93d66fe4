#!/usr/bin/env python3
"""Checks issue 11's tamper run (scripts/h200/tamper/): prints a markdown summary and, last, one
line per check `PASS <what>` or `FAIL <what>: <why>`; exits 1 when any check failed.

    python3 scripts/h200/tamper_check.py RUN_DIR

Each candidate's kernel.py starts with `# expect: passed|tampered|crashed`. The checks: the
candidates were verified in name order on one device; each `tampered` one was rejected with a
reason that says "tampered with the evaluator's state"; the `crashed` one (a sticky CUDA error:
an honest bug looks the same, so it is not called tampering) was rejected because the device
context became unusable; both honest kernels passed and their times agree within 2%; the process
the candidate 08 left behind is gone; the report names the tampering candidates.
"""

import json
import os
import re
import sys
from pathlib import Path

TAMPERED = "tampered with the evaluator's state"
CRASHED = "the device context is unusable"


def main(run_dir):
    run = Path(run_dir)
    records = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    finished = {r["candidate"]: r for r in records if r["type"] == "candidate_finished"}
    order = [
        r["candidate"] for r in records if r["type"] == "step_started" and r["step"] == "verify"
    ]
    starts = [r for r in records if r["type"] == "evaluator_started"]
    checks = []
    rows = []
    honest_ms = []
    for candidate in sorted(c for c in finished if c > 0):
        folder = run / "candidates" / str(candidate)
        source = (folder / "kernel.py").read_text()
        match = re.match(r"# expect: (\w+)", source)
        expect = match.group(1) if match else "?"
        record = finished[candidate]
        reason = record.get("reason") or ""
        if expect == "passed":
            ok = record["passed"] is True
            if ok:
                honest_ms.append(record["time_ms"])
        elif expect == "tampered":
            ok = record["passed"] is False and TAMPERED in reason
        elif expect == "crashed":
            ok = record["passed"] is False and CRASHED in reason
        else:
            ok = False
        title = next((line for line in source.splitlines()[1:3] if line.strip()), "")
        rows.append((candidate, expect, record["passed"], record.get("time_ms"), reason, title))
        checks.append(
            (
                ok,
                f"candidate {candidate} ({expect})",
                f"passed={record['passed']} reason={reason!r}",
            )
        )
        if "orphan.pid" in os.listdir(folder):
            pid = int((folder / "orphan.pid").read_text())
            alive = Path(f"/proc/{pid}").exists()
            checks.append(
                (
                    not alive,
                    f"candidate {candidate}'s orphan process {pid} was ended",
                    "it is still running",
                )
            )
    checks.append(
        (
            order == sorted(order),
            "candidates verified in name order on one device",
            f"order {order}",
        )
    )
    if len(honest_ms) == 2:
        spread = abs(honest_ms[0] - honest_ms[1]) / min(honest_ms)
        checks.append(
            (
                spread <= 0.02,
                f"honest times {honest_ms[0]:.4f} and {honest_ms[1]:.4f} ms within 2% ({spread:.2%})",
                "",
            )
        )
    else:
        checks.append((False, "both honest kernels timed", f"times {honest_ms}"))
    report = (run / "report.md").read_text() if (run / "report.md").exists() else ""
    checks.append(
        (
            "Tampered with the evaluator's state" in report,
            "report.md names the tampering candidates",
            "",
        )
    )
    print("| candidate | expected | passed | time (ms) | reason |")
    print("|---|---|---|---|---|")
    for candidate, expect, passed, ms, reason, _ in rows:
        cell = reason.replace("|", "\\|").splitlines()[0] if reason else ""
        print(
            f"| {candidate} | {expect} | {passed} | {ms if ms is not None else '–'} | {cell[:300]} |"
        )
    generations = [s["ready"].get("generation") for s in starts]
    print(f"\nevaluator starts (zygote generations): {generations}")
    setups = [s["ready"].get("setup_s") for s in starts]
    print(f"their setup_s: {setups}\n")
    failed = 0
    for ok, what, why in checks:
        if ok:
            print(f"PASS {what}")
        else:
            failed += 1
            print(f"FAIL {what}: {why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
