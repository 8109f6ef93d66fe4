"""Multi-device scaling on the noop platform (issues 7 and 13, the part the CPUs allow): the
same work with 1, 2, 4 and 8 simulated devices, the replay provider answering after 10 times a
candidate's (simulated) evaluation time or at once, in rounds mode and in steady search, both
with default settings. Reports candidates evaluated per minute and each device's busy fraction
from the first dispatch (the first step of a candidate other than the initial kernel) to the
last candidate's result, and whether two steps ever overlapped on one device, all from the
journals.

usage: python3 scripts/noop-scaling.py [KACTORS_BINARY [CANDIDATES]]   (from the repository root)
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from journal_spans import busy_fractions, replay_kernel, run_kactors, spans_by_device, stamp  # noqa: E402

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/kactors"
EVAL_S = 0.2
CANDIDATES = int(sys.argv[2]) if len(sys.argv) > 2 else 96


def overlaps(spans):
    """Pairs of steps that ran on one device at the same time."""
    found = 0
    for device, device_spans in spans.items():
        device_spans.sort()
        for (_, end), (start, _) in zip(device_spans, device_spans[1:]):
            if start < end - 1e-3:
                found += 1
    return found


def measure(work, kernel, latency, search):
    rows = []
    for devices in (1, 2, 4, 8):
        records = run_kactors(
            binary, work, f"scaling-{search}-{latency}-{devices}",
            f"platform: noop\nprovider: replay\nstrategy: beam_search\nsearch: {search}\nmax_rounds: 1000\nmax_refinements: 0\n"
            f"noop_eval_s: {EVAL_S}\nreplay_latency_s: {latency}\nnum_workers: {devices}\n"
            "strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n",
            kernel,
        )
        evaluated = [r for r in records if r["type"] == "candidate_finished" and r["candidate"] != 0 and r.get("duplicate_of") is None]
        # The search's work: from the first dispatch of a proposed candidate to the last
        # candidate's result (what comes before is the initial kernel and the first LLM round
        # trip; after, the finale, which re-times on one device whatever the device count).
        begin = min(stamp(r["t"]) for r in records if r["type"] == "step_started" and r.get("candidate", 0) != 0)
        end = max(stamp(r["t"]) for r in evaluated)
        wall = end - begin
        spans = spans_by_device(records)
        busy = {device: f"{100 * fraction:.0f}%" for device, fraction in busy_fractions(spans, begin, end).items()}
        rows.append((devices, len(evaluated), wall, 60 * len(evaluated) / wall, busy, overlaps(spans)))
    base = rows[0][3]
    print(f"\nreplay latency {latency} s, evaluation {EVAL_S} s (simulated), {CANDIDATES} replayed candidates, beam 2 x 4, search: {search}, default settings\n")
    print("| devices | candidates | wall (s) | candidates/min | vs 1 device | busy fraction per device | overlapping steps on a device |")
    print("|---|---|---|---|---|---|---|")
    for devices, count, wall, rate, busy, overlapping in rows:
        fractions = ", ".join(f"{d}: {f}" for d, f in busy.items())
        print(f"| {devices} | {count} | {wall:.1f} | {rate:.1f} | {rate / base:.2f}x | {fractions} | {overlapping} |", flush=True)


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    kernel = replay_kernel(work, CANDIDATES)
    for latency in (10 * EVAL_S, 0.0):
        for search in ("rounds", "steady"):
            measure(work, kernel, latency, search)
