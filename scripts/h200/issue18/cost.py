#!/usr/bin/env python3
"""Issue 18's cost per candidate, and its tolerance cheat, with the evaluator of before issue 18
and the one of now side by side on one GPU, through their own protocol.

    python3 scripts/h200/issue18/cost.py OLD_EVALUATOR NEW_EVALUATOR WORK KERNEL_DIR:CANDIDATE,...
    python3 scripts/h200/issue18/cost.py --verdicts COST_JSONL

Per kernel directory both evaluators start; each candidate is verified once in each to compile
it, then verified and timed in both, alternating which goes first, three rounds. The added
seconds per candidate is (verify + time) now minus before, paired; their median and largest are
printed with the timed medians of both (which must agree within 1%), then PASS or FAIL against
the goal of 0.1 s. A directory named softmax holds the cheat: it must pass before and fail now.
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluate import ALLOWLIST, staged  # noqa: E402
from integrity_overhead import Evaluator, judge  # noqa: E402

GOAL_S = 0.1
ROUNDS = 3
# CUDA events resolve about half a microsecond: two medians of a kernel of a few microseconds
# agree within that, not within 1%.
EVENT_RESOLUTION_MS = 0.0005


def seconds(verify, time):
    return verify["seconds"] + (time or {}).get("seconds", 0.0)


def compare(old_script, new_script, work, kernel_dir, candidates):
    sides = {
        "before": Evaluator(old_script, ALLOWLIST, kernel_dir, work / "before", {}),
        "now": Evaluator(new_script, ALLOWLIST, kernel_dir, work / "now", {}),
    }
    folders = {side: [staged(work / side, c) for c in candidates] for side in sides}
    for side, evaluator in sides.items():
        for folder in folders[side]:
            judge(evaluator, folder)
    lines = []
    for index, candidate in enumerate(candidates):
        added, medians = [], {"before": [], "now": []}
        verdicts = {}
        for round_ in range(ROUNDS):
            order = ["before", "now"] if round_ % 2 == 0 else ["now", "before"]
            figures = {}
            for side in order:
                verify, time = judge(sides[side], folders[side][index])
                figures[side] = seconds(verify, time)
                verdicts[side] = (verify.get("passed"), verify.get("reason"), time)
                if time and time.get("median_ms") is not None:
                    medians[side].append(time["median_ms"])
            added.append(figures["now"] - figures["before"])
        name = Path(candidate).name
        line = {
            "kernel_dir": str(kernel_dir),
            "candidate": name,
            "added_s_median": statistics.median(added),
            "added_s_max": max(added),
            "median_ms_before": statistics.median(medians["before"]) if medians["before"] else None,
            "median_ms_now": statistics.median(medians["now"]) if medians["now"] else None,
            "verdict_before": verdicts["before"][:2],
            "verdict_now": verdicts["now"][:2],
            "seen_content_ms_now": (verdicts["now"][2] or {}).get("seen_content_ms"),
        }
        print(json.dumps(line), flush=True)
        lines.append(line)
    for evaluator in sides.values():
        evaluator.close()
    return lines


def verdict_lines(lines, cheat):
    results = []
    for line in lines:
        what = f"{Path(line['kernel_dir']).name}/{line['candidate']}"
        if cheat and "cheat" in line["candidate"]:
            passed_before, passed_now = line["verdict_before"][0], line["verdict_now"][0]
            ok = passed_before and not passed_now
            results.append(
                f"{'PASS' if ok else 'FAIL'} {what}: passed before {passed_before}, now "
                f"{passed_now} ({line['verdict_now'][1]})"
            )
            continue
        added = line["added_s_median"]
        results.append(
            f"{'PASS' if added <= GOAL_S else 'FAIL'} {what}: {added:+.3f} s per candidate "
            f"(median of {ROUNDS}, largest {line['added_s_max']:+.3f} s; goal {GOAL_S} s)"
        )
        before, now = line["median_ms_before"], line["median_ms_now"]
        if before and now:
            apart = abs(now - before) / before * 100
            agree = apart <= 1.0 or abs(now - before) <= EVENT_RESOLUTION_MS
            results.append(
                f"{'PASS' if agree else 'FAIL'} {what}: timed {before:.4f} ms before, "
                f"{now:.4f} ms now ({apart:.2f}% apart)"
            )
    return results


def main(old_script, new_script, work=None, *specs):
    if old_script == "--verdicts":
        # Judged again from a run's cost.jsonl (`cost.py --verdicts FILE`).
        lines = [json.loads(line) for line in Path(new_script).read_text().splitlines()]
        results = []
        for name in dict.fromkeys(Path(line["kernel_dir"]).name for line in lines):
            group = [line for line in lines if Path(line["kernel_dir"]).name == name]
            results += verdict_lines(group, cheat=name == "softmax")
        for line in results:
            print(line)
        return 0 if all(line.startswith("PASS") for line in results) else 1
    results = []
    for spec in specs:
        kernel_dir, _, candidates = spec.partition(":")
        name = Path(kernel_dir).name
        lines = compare(
            old_script, new_script, Path(work) / name, kernel_dir, candidates.split(",")
        )
        results += verdict_lines(lines, cheat=name == "softmax")
    for line in results:
        print(line, file=sys.stderr)
    return 0 if all(line.startswith("PASS") for line in results) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
