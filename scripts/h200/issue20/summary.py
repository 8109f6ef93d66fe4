#!/usr/bin/env python3
"""Issue 20's figures from the runs' journals (scripts/h200/issue20/issue20.sh): per run, the
time from `kactors run` (run_started) to the first verified seed, each seed's attempts and
times, the rounds and the best kernel; one `PASS`/`FAIL` line per check.

    python3 summary.py RUNS_DIR EXITS_FILE
"""

import json
import sys
from datetime import datetime
from pathlib import Path


def stamp(record):
    return datetime.fromisoformat(record["t"].replace("Z", "+00:00"))


def journal(run):
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]


def verdict(ok, what, why=""):
    print(f"PASS {what}" if ok else f"FAIL {what}: {why}")


def summarize(name, run, exit_code, expect_refinements):
    records = journal(run)
    started = stamp(records[0])
    seeds = {r["candidate"] for r in records if r["type"] == "candidate_planned" and r.get("kind") == "seed"}
    evaluated = [r for r in records if r["type"] == "evaluated" and r["candidate"] in seeds]
    finished = {r["candidate"]: r for r in records if r["type"] == "candidate_finished"}
    verified = [r for r in evaluated if r["outcome"] == "verified"]
    print(f"## {name}\n")
    print("| seed | attempt | outcome | evaluation s | since `kactors run` s | reason |\n|---|---|---|---|---|---|")
    for r in evaluated:
        reason = (r.get("reason") or "").splitlines()[:1] or [""]
        print(f"| {r['candidate']} | {r['attempt']} | {r['outcome']} | {r.get('seconds') or 0:.2f} | "
              f"{(stamp(r) - started).total_seconds():.1f} | {reason[0][:90]} |")
    first = (stamp(verified[0]) - started).total_seconds() if verified else None
    beams = [r for r in records if r["type"] == "beam_updated"]
    rounds = [r for r in records if r["type"] == "round_finished"]
    ended = records[-1]
    print()
    print(f"- first verified seed: {f'{first:.1f} s' if first is not None else 'none'} after `kactors run`")
    print(f"- rounds finished: {len(rounds)}; candidates: {len(finished)}; outcome: {ended.get('outcome')} "
          f"({ended.get('reason')}); best candidate {ended.get('best_candidate')} at {ended.get('best_ms')} ms, "
          f"the first beam's kernel at {ended.get('initial_ms')} ms")
    print()
    verdict(exit_code == 0, f"{name}: kactors exited 0", f"exit {exit_code}")
    verdict(bool(verified), f"{name}: a seed verified", "no seed passed")
    verdict(bool(beams) and beams[0]["round"] == 0, f"{name}: the first beam is made of seeds (round 0)", beams[:1])
    verdict(len(rounds) == 2, f"{name}: two rounds after generation", f"{len(rounds)} rounds")
    verdict((run / "final" / "input.py").is_file() and (run / "final" / "problem.py").is_file(),
            f"{name}: final/ is a kernel directory (input.py beside problem.py)")
    if expect_refinements:
        attempts = [r["attempt"] for r in verified]
        verdict(attempts[:1] == [expect_refinements],
                f"{name}: the seed fails first and passes at refinement {expect_refinements}", attempts)
    report = (run / "report.md").read_text()
    verdict("Some(" not in report and "None" not in report, f"{name}: report.md prints no debug formatting")
    verdict("not run: the kernel directory has no test.py" in report,
            f"{name}: report.md says the missing test.py was not run")
    print()


def main(runs, exits):
    codes = dict(line.split() for line in Path(exits).read_text().splitlines())
    for name in ("relu", "layernorm", "matmul", "row_sum"):
        folders = sorted(p for p in (Path(runs) / name).glob("*/") if (p / "journal.jsonl").is_file())
        if not folders:
            verdict(False, f"{name}: a run directory", "none")
            continue
        summarize(name, folders[0], int(codes.get(name, -1)), 2 if name == "row_sum" else 0)


if __name__ == "__main__":
    main(*sys.argv[1:])
