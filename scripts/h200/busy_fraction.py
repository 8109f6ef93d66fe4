"""The busy fraction of each device over a whole run, from its journal, a resumed run's too.

    python3 scripts/h200/busy_fraction.py RUN_DIR

Busy: from each step_started (verify, time, profile, reference) to its step_finished; a step a
death left open ends at the dead process's last record. Over the run: from run_started to
run_finished; the gaps between a death and its resume are shown and also taken out. Over the
search: from the first step of a proposed candidate to the last result of a proposal's first
attempt (tests/busy.rs's window), the gaps taken out.
"""

import datetime
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from journal_spans import records_of  # noqa: E402


def when(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc
    ).timestamp()


def main() -> None:
    run = pathlib.Path(sys.argv[1])
    records = records_of(run)
    start, end = when(records[0]["t"]), when(records[-1]["t"])
    busy, open_steps, gaps, processes = {}, {}, [], 1
    spans = []
    first_dispatch, last_first_attempt = None, None
    evaluated, twice, seconds, latencies = set(), [], [], []
    previous_t = start
    for record in records:
        t, kind = when(record["t"]), record["type"]
        if kind == "run_resumed":
            processes += 1
            gaps.append(t - previous_t)
            for device, begun in open_steps.items():
                spans.append((device, begun, previous_t))
            open_steps = {}
        elif kind == "step_started":
            open_steps[record["device"]] = t
            if record.get("candidate", 0) > 0 and first_dispatch is None:
                first_dispatch = t
        elif kind == "step_finished" and record["device"] in open_steps:
            spans.append((record["device"], open_steps.pop(record["device"]), t))
        elif kind == "evaluated":
            key = (record["candidate"], record["attempt"])
            if key in evaluated:
                twice.append(key)
            evaluated.add(key)
            if record.get("seconds") is not None and record["candidate"] > 0:
                seconds.append(record["seconds"])
            if record["candidate"] > 0 and record["attempt"] == 0:
                last_first_attempt = t
        elif kind == "proposal_received" and record.get("latency_s") is not None:
            latencies.append(record["latency_s"])
        previous_t = t
    for device, begun, ended in spans:
        busy[device] = busy.get(device, 0.0) + ended - begun
    wall = end - start
    gap = sum(gaps)
    gap_spans = []
    previous = start
    for record in records:
        if record["type"] == "run_resumed":
            gap_spans.append((previous, when(record["t"])))
        previous = when(record["t"])

    def overlap(a: float, b: float, spans_of: list) -> float:
        return sum(max(0.0, min(b, y) - max(a, x)) for x, y in spans_of)

    search = {}
    if first_dispatch is not None and last_first_attempt is not None:
        window = last_first_attempt - first_dispatch - overlap(first_dispatch, last_first_attempt, gap_spans)
        for device, begun, ended in spans:
            search[device] = search.get(device, 0.0) + overlap(first_dispatch, last_first_attempt, [(begun, ended)])
        search = {device: time / window for device, time in search.items()}
    finished = records[-1]
    print(f"run: {run.name}; {processes} process(es); outcome {finished.get('outcome')} ({finished.get('reason')})")
    print(f"wall {wall:.1f} s from run_started to the last record; gaps between a death and its resume {gap:.1f} s")
    print(f"candidates evaluated: {len({c for c, _ in evaluated})}; evaluated twice: {twice or 'none'}")
    if seconds:
        print(f"an evaluation's device time: median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f})")
    if latencies:
        print(f"a proposal's latency: median {statistics.median(latencies):.2f} s")
    print()
    print("| device | busy s | busy / wall | busy / (wall - gaps) | over the search, gaps out |")
    print("|---|---|---|---|---|")
    for device, time in sorted(busy.items()):
        over_search = f"{search[device]:.1%}" if device in search else "-"
        print(f"| {device} | {time:.1f} | {time / wall:.1%} | {time / (wall - gap):.1%} | {over_search} |")


if __name__ == "__main__":
    main()
