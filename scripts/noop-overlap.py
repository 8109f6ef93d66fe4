"""Rounds mode with and without the overlap of rounds (issue 23 part 5), on the noop platform:
the same replayed candidates on 1, 2 and 4 simulated devices, beam 2 x 4, evaluations of 0.2 s
and the replay provider answering after 2 s, each run once with `overlap_rounds: false` and
once with the default, and once more without it to see how far a run differs from itself.
Reports each run's wall time and each device's busy fraction from the first dispatch (the first
step of a candidate other than the initial kernel) to the last candidate's result, how many
parents were analysed before their round started, and whether the run ended every round with
the same beam as the first run without the overlap. (Two runs of the same settings can differ:
when a round brings two new parents their analyses race, and the parent whose analysis comes
back first sends its proposals first and gets the next replay files, with or without the
overlap.) REFINEMENTS (default 0) is max_refinements: the refinements of a round's last
failures are what the overlap can hide most of.

usage: python3 scripts/noop-overlap.py [KACTORS_BINARY [CANDIDATES [REFINEMENTS]]]   (from the repository root)
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from journal_spans import busy_fractions, replay_kernel, run_kactors, spans_by_device, stamp  # noqa: E402

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/kactors"
CANDIDATES = int(sys.argv[2]) if len(sys.argv) > 2 else 64
REFINEMENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 0
EVAL_S = 0.2
LATENCY_S = 2.0


def run(work, kernel, devices, overlap, name):
    strategy = (
        f"platform: noop\nprovider: replay\nstrategy: beam_search\nmax_rounds: 1000\nmax_refinements: {REFINEMENTS}\n"
        f"noop_eval_s: {EVAL_S}\nreplay_latency_s: {LATENCY_S}\nnum_workers: {devices}\n"
        f"overlap_rounds: {'true' if overlap else 'false'}\n"
        "strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n"
    )
    return run_kactors(binary, work, f"overlap-{devices}-{name.replace(' ', '-')}", strategy, kernel)


def figures(records):
    evaluated = [r for r in records if r["type"] == "candidate_finished" and r["candidate"] != 0]
    begin = min(stamp(r["t"]) for r in records if r["type"] == "step_started" and r.get("candidate", 0) != 0)
    end = max(stamp(r["t"]) for r in evaluated)
    busy = busy_fractions(spans_by_device(records), begin, end)
    return end - begin, busy


def analysed_ahead(records):
    started, ahead = 0, 0
    for r in records:
        if r["type"] == "round_started":
            started = r["round"]
        elif r["type"] == "analysis_requested" and r["round"] > started:
            ahead += 1
    return ahead


def beams(records):
    return [(r["round"], [(m["candidate"], m["time_ms"]) for m in r["beam"]]) for r in records if r["type"] == "beam_updated"]


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    kernel = replay_kernel(work, CANDIDATES)
    print(f"\nrounds mode, replay latency {LATENCY_S} s, evaluation {EVAL_S} s (simulated), {CANDIDATES} replayed candidates, beam 2 x 4, max_refinements {REFINEMENTS}\n")
    print("| devices | overlap | wall (s) | busy fraction per device | mean busy | parents analysed ahead | same beams as the first run without |")
    print("|---|---|---|---|---|---|---|")
    for devices in (1, 2, 4):
        first = run(work, kernel, devices, False, "off")
        for name, overlap in (("off", False), ("off again", False), ("on", True)):
            records = first if name == "off" else run(work, kernel, devices, overlap, name)
            wall, busy = figures(records)
            fractions = ", ".join(f"{d}: {100 * f:.0f}%" for d, f in busy.items())
            mean = 100 * sum(busy.values()) / len(busy)
            same = "-" if name == "off" else ("yes" if beams(records) == beams(first) else "no")
            print(f"| {devices} | {name} | {wall:.1f} | {fractions} | {mean:.0f}% | {analysed_ahead(records)} | {same} |", flush=True)
