#!/usr/bin/env python3
"""Checks issue 19's runs on the H200; prints one line per check, `PASS <what>` or
`FAIL <what>: <why>`, and a markdown table before them.

    python3 check.py attacks RUN_DIR TCP_RECORD PTH_PATH KERNEL_DIR HOME_DIR
    python3 check.py compare SANDBOXED_RUN[,RUN...] UNSANDBOXED_RUN[,RUN...]
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
    """{kernel source: (time_ms, evaluation seconds, is the run's first evaluation)} of each
    candidate that passed; the first evaluation also starts the evaluator."""
    records = journal(run)
    seconds = {}
    for r in records:
        if r["type"] == "evaluated" and r.get("seconds") is not None:
            seconds[r["candidate"]] = seconds.get(r["candidate"], 0.0) + r["seconds"]
    first = min(seconds, default=None)
    found = {}
    for r in records:
        if r["type"] == "candidate_finished" and r.get("passed") and r.get("time_ms"):
            source = (Path(run) / "candidates" / str(r["candidate"]) / "kernel.py").read_text()
            found[source] = (r["time_ms"], seconds.get(r["candidate"]), r["candidate"] == first)
    return found


def joined(runs):
    """{first line of the kernel: ([time_ms], [seconds], is first)} over the comma-separated runs,
    keeping only kernels every run verified."""
    each = [by_source(run) for run in runs.split(",")]
    common = set.intersection(*(set(found) for found in each))
    return {source.splitlines()[0][:60]: ([found[source][0] for found in each],
                                          [found[source][1] for found in each],
                                          each[0][source][2])
            for source in common}


def spread(times):
    """How far apart a kernel's times in runs of one setting are, relative to the fastest."""
    return max(times) / min(times) - 1


def compare(sandboxed, unsandboxed):
    """Both arguments: comma-separated run directories of the same searches."""
    inside, outside = joined(sandboxed), joined(unsandboxed)
    print("| kernel | sandboxed ms | unsandboxed ms | ratio | sandboxed s | unsandboxed s |\n|---|---|---|---|---|---|")
    ratios, extra, start = [], [], []
    for key in sorted(inside.keys() & outside.keys()):
        (t_in, s_in, first), (t_out, s_out, _) = inside[key], outside[key]
        ratio = statistics.mean(t_in) / statistics.mean(t_out)
        ratios.append(ratio)
        if None not in s_in + s_out:
            (start if first else extra).append(statistics.mean(s_in) - statistics.mean(s_out))
        print(f"| {key}{' (first)' if first else ''} | {' '.join(f'{t:.4f}' for t in t_in)} | "
              f"{' '.join(f'{t:.4f}' for t in t_out)} | {ratio:.4f} | "
              f"{' '.join(f'{s:.3f}' for s in s_in)} | {' '.join(f'{s:.3f}' for s in s_out)} |")
    # A kernel whose time moves by more than 1% between two runs of the same setting (an
    # autotuner that picks another configuration, a split-K whose reduce varies) cannot show a 1%
    # effect of the sandbox either way; it is named, and the verdict rests on the others.
    steady = {key: ratio for key, ratio in zip(sorted(inside.keys() & outside.keys()), ratios)
              if spread(inside[key][0]) <= 0.01 and spread(outside[key][0]) <= 0.01}
    for key in sorted((inside.keys() & outside.keys()) - steady.keys()):
        print(f"INFO {key[:40]!r} varies run to run by {spread(inside[key][0]):.0%} with the sandbox and "
              f"{spread(outside[key][0]):.0%} without it: left out of the 1% check")
    verdict(bool(steady) and all(abs(r - 1) <= 0.01 for r in steady.values()),
            f"honest kernels within 1% of their times without the sandbox ({len(steady)} kernels steady run to run, "
            f"ratios {[round(r, 4) for r in steady.values()]})",
            "see the table")
    if extra:
        median = statistics.median(extra)
        verdict(median <= 0.05, f"median cost per candidate of the sandbox {median * 1000:+.0f} ms over "
                f"{len(extra)} candidates after the first (goal at most 50 ms): "
                f"{[round(e * 1000) for e in extra]} ms", extra)
    else:
        verdict(False, "cost per candidate", "no candidate after the first verified in every run")
    for cost in start:
        print(f"INFO the run's first evaluation, which also starts the evaluator: {cost * 1000:+.0f} ms with the sandbox")
    for run in sandboxed.split(","):
        profiled(run)


def profiled(sandboxed):
    records = journal(sandboxed)
    recorded = [r for r in records if r["type"] == "profile_recorded"]
    failed = [r.get("error", "")[:200] for r in records if r["type"] in ("profile_failed", "profiling_stopped")]
    verdict(bool(recorded) and not failed, "ncu profiles inside the sandbox "
            f"({[(r['candidate'], r['bottleneck'], r['duration_ms']) for r in recorded]})", failed)


if __name__ == "__main__":
    {"attacks": attacks, "compare": compare}[sys.argv[1]](*sys.argv[2:])
