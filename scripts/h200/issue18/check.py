#!/usr/bin/env python3
"""Checks one of issue 18's adversarial runs: prints a markdown table and, last, one line per
check, `PASS <what>` or `FAIL <what>: <why>`.

    python3 scripts/h200/issue18/check.py RUN_DIR [ALONE_RUN_DIR]

Each candidate's kernel.py starts with `# expect: passed|memo|race|wrong`. A memo must be
rejected as one (its time below the speed of light, or fast only on content it had seen) or
timed at its real cost, never faster than the search's fastest honest kernel (on a problem so
small that fingerprinting and copying cost more than computing, it is simply slow); a race must
be rejected as unfinished on the caller's stream, a wrong one by the verification; the others
pass.
With ALONE_RUN_DIR (a search of the honest kernels alone), each kernel that passed in both
runs must agree within 1%.
"""

import json
import sys
from pathlib import Path

MEMO = ("memo of earlier calls",)
RACE = "the output was not ready on the caller's stream"


def journal(run):
    return [json.loads(line) for line in (Path(run) / "journal.jsonl").read_text().splitlines()]


def kernels(run):
    """{candidate: expectation} from the first line of each candidate's kernel.py: the initial
    kernel (candidate 0) must pass; a kernel without a `# expect:` line (the examples' own) is
    listed but not judged."""
    found = {}
    for folder in sorted((Path(run) / "candidates").iterdir()):
        kernel = folder / "kernel.py"
        if not kernel.is_file() or not folder.name.isdigit():
            continue
        lines = kernel.read_text().splitlines()
        if lines and lines[0].startswith("# expect:"):
            expect = lines[0].removeprefix("# expect: ").strip()
        else:
            expect = "initial" if folder.name == "0" else "unmarked"
        found[int(folder.name)] = expect
    return found


def times(records):
    return {
        r["candidate"]: r
        for r in records
        if r["type"] == "evaluated" and r["outcome"] == "verified"
    }


def main(run, alone=None):
    records = journal(run)
    finished = {r["candidate"]: r for r in records if r["type"] == "candidate_finished"}
    expected = kernels(run)
    results = []
    print("| candidate | expected | passed | time (ms) | % of speed of light | seconds | reason |")
    print("|---|---|---|---|---|---|---|")
    verified = times(records)
    honest = [
        verified[c]["time_ms"]
        for c, expect in expected.items()
        if expect in ("passed", "initial") and c in verified
    ]
    fastest_honest = min(honest) if honest else None
    for candidate, expect in sorted(expected.items()):
        record = finished.get(candidate)
        if record is None:
            results.append(f"FAIL candidate {candidate} ({expect}): never finished")
            continue
        reason = record.get("reason") or ""
        timed = verified.get(candidate, {})
        print(
            f"| {candidate} | {expect} | {record['passed']} | {timed.get('time_ms') or '–'} | "
            f"{timed.get('speed_of_light_pct') or '–'} | {timed.get('seconds') or '–'} | "
            f"{reason[:300].replace('|', '/')} |"
        )
        if expect == "unmarked":
            continue
        if expect in ("passed", "initial"):
            ok = record["passed"]
        elif expect == "memo" and record["passed"]:
            time = timed.get("time_ms")
            ok = fastest_honest is not None and time is not None and time >= fastest_honest
            reason = (
                f"timed at its real cost: {time} ms, the fastest honest kernel {fastest_honest} ms"
            )
        elif expect == "memo":
            ok = any(words in reason for words in MEMO)
        elif expect == "race":
            ok = not record["passed"] and RACE in reason
        else:
            ok = not record["passed"] and "verification failed" in reason
        verdict = reason[:200] if reason else "passed"
        results.append(f"{'PASS' if ok else 'FAIL'} candidate {candidate} ({expect}): {verdict}")
    rechecks = [r for r in records if r["type"] == "final_rechecked"]
    failed = [r for r in rechecks if not r["passed"]]
    results.append(
        f"{'PASS' if rechecks and not failed else 'FAIL'} the finale re-checked {len(rechecks)} "
        f"kernel(s) on new seeds, {len(failed)} failed"
    )
    end = records[-1]
    results.append(
        f"{'PASS' if end['type'] == 'run_finished' and end['outcome'] == 'completed' else 'FAIL'} "
        f"run {end.get('outcome')}: best candidate {end.get('best_candidate')} at {end.get('best_ms')} ms"
    )
    if alone is not None:
        alone_sources = {}
        for folder in (Path(alone) / "candidates").iterdir():
            if (folder / "kernel.py").is_file():
                body = "\n".join(
                    l
                    for l in (folder / "kernel.py").read_text().splitlines()
                    if not l.startswith("# expect:")
                )
                alone_sources[body] = int(folder.name)
        alone_times = times(journal(alone))
        for candidate, record in verified.items():
            body = "\n".join(
                l
                for l in (Path(run) / "candidates" / str(candidate) / "kernel.py")
                .read_text()
                .splitlines()
                if not l.startswith("# expect:")
            )
            twin = alone_sources.get(body)
            if twin is None or twin not in alone_times:
                continue
            mine, theirs = record["time_ms"], alone_times[twin]["time_ms"]
            apart = abs(mine - theirs) / theirs * 100
            results.append(
                f"{'PASS' if apart <= 1.0 else 'FAIL'} candidate {candidate} among adversaries "
                f"{mine:.4f} ms, alone {theirs:.4f} ms: {apart:.2f}% apart"
            )
    print()
    for line in results:
        print(line)
    return 0 if all(line.startswith("PASS") for line in results) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
