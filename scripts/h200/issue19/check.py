#!/usr/bin/env python3
"""Checks issue 19's runs on the H200; prints one line per check, `PASS <what>` or
`FAIL <what>: <why>`, and a markdown table before them.

    python3 check.py attacks RUN_DIR TCP_RECORD PTH_PATH KERNEL_DIR HOME_DIR
    python3 check.py compare SANDBOXED_RUN UNSANDBOXED_RUN
"""

import json
import statistics
import sys
from pathlib import Path


def journal(run):
    return [json.loads(line) for line in (Path(run) / "journal.jsonl").read_text().splitlines()]


def verdict(ok, what, why=""):
    print(f"PASS {what}" if ok else f"FAIL {what}: {why}")


def expectations(run):
    found = {}
    for folder in (Path(run) / "candidates").iterdir():
        kernel = folder / "kernel.py"
        if folder.name.isdigit() and kernel.is_file():
            first = kernel.read_text().splitlines()[0]
            if first.startswith("# expect: "):
                found[int(folder.name)] = first.removeprefix("# expect: ")
    return found


def attacks(run, tcp_record, pth, kernel, home):
    records = journal(run)
    finished = {r["candidate"]: r for r in records if r["type"] == "candidate_finished"}
    print("| candidate | expected | passed | reason |\n|---|---|---|---|")
    for candidate, expect in sorted(expectations(run).items()):
        record = finished.get(candidate, {})
        reason = (record.get("reason") or "").splitlines()[-1:] or [""]
        print(f"| {candidate} | {expect} | {record.get('passed')} | {reason[0][:140]} |")
        if expect == "passed":
            verdict(record.get("passed") is True, f"honest candidate {candidate} passes in the sandbox", record.get("reason"))
        else:
            words = expect.removeprefix("refused ")
            verdict(record.get("passed") is False and words in (record.get("reason") or ""),
                    f"candidate {candidate} refused ({words})", record.get("reason"))
    verdict(not Path(tcp_record).read_text().strip(), "no connection or datagram reached the listeners",
            Path(tcp_record).read_text()[:200])
    verdict(not Path(pth).exists(), "no .pth planted", pth)
    verdict(not (Path(kernel) / "planted.py").exists(), "kernel directory untouched")
    verdict(not (Path(home) / ".bashrc").exists(), "$HOME untouched")
    for planted in ("tools/evaluator.py", "candidates/1/kernel.py"):
        verdict("# planted" not in (Path(run) / planted).read_text(), f"{planted} untouched")
    tests = [r for r in records if r["type"] == "user_test_ran"]
    verdict(bool(tests) and tests[-1].get("passed") is True, "the user's test.py passes in the sandbox", tests)
    started = records[0]
    verdict(started.get("sandbox", {}).get("setting") == "required", "the run records a required sandbox", started.get("sandbox"))
    finished_run = records[-1]
    verdict(finished_run.get("outcome") == "completed", "the run completed", finished_run)


def by_source(run):
    """{first line of the kernel: (time_ms, evaluation seconds)} of each candidate that passed."""
    records = journal(run)
    seconds = {}
    for r in records:
        if r["type"] == "evaluated" and r.get("seconds") is not None:
            seconds[r["candidate"]] = seconds.get(r["candidate"], 0.0) + r["seconds"]
    found = {}
    for r in records:
        if r["type"] == "candidate_finished" and r.get("passed") and r.get("time_ms"):
            name = (Path(run) / "candidates" / str(r["candidate"]) / "kernel.py").read_text().splitlines()[0]
            found[f"{r['candidate']} {name[:60]}"] = (r["time_ms"], seconds.get(r["candidate"]))
    return found


def compare(sandboxed, unsandboxed):
    inside, outside = by_source(sandboxed), by_source(unsandboxed)
    print("| candidate | sandboxed ms | unsandboxed ms | ratio | sandboxed s | unsandboxed s |\n|---|---|---|---|---|---|")
    ratios, extra = [], []
    for key in sorted(inside.keys() & outside.keys()):
        (t_in, s_in), (t_out, s_out) = inside[key], outside[key]
        ratios.append(t_in / t_out)
        if s_in is not None and s_out is not None:
            extra.append(s_in - s_out)
        print(f"| {key} | {t_in:.4f} | {t_out:.4f} | {t_in / t_out:.4f} | {s_in} | {s_out} |")
    verdict(bool(ratios) and all(abs(r - 1) <= 0.01 for r in ratios),
            f"honest kernels within 1% of their times without the sandbox ({len(ratios)} kernels, ratios {[round(r, 4) for r in ratios]})",
            "see the table")
    if extra:
        median = statistics.median(extra)
        verdict(median <= 0.05, f"median cost per candidate of the sandbox {median * 1000:+.0f} ms (goal at most 50 ms)", extra)
    records = journal(sandboxed)
    recorded = [r for r in records if r["type"] == "profile_recorded"]
    failed = [r.get("error", "")[:200] for r in records if r["type"] in ("profile_failed", "profiling_stopped")]
    verdict(bool(recorded) and not failed, "ncu profiles inside the sandbox "
            f"({[(r['candidate'], r['bottleneck'], r['duration_ms']) for r in recorded]})", failed)


if __name__ == "__main__":
    {"attacks": attacks, "compare": compare}[sys.argv[1]](*sys.argv[2:])
