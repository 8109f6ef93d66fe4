"""Multi-device scaling on the noop platform (issue 7, the part the CPUs allow): the same work
with 1, 2 and 4 simulated devices, the replay provider answering after 10 times a candidate's
(simulated) evaluation time, in rounds mode and in steady search. Reports candidates evaluated
per minute, each device's busy fraction, and whether two steps ever overlapped on one device,
all from the journals.

usage: python3 scripts/noop-scaling.py [KACTORS_BINARY]   (run from the repository root)
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from journal_spans import busy_fractions, spans_by_device, stamp  # noqa: E402

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/kactors"
EVAL_S = 0.2
CANDIDATES = 48


def overlaps(spans):
    """Pairs of steps that ran on one device at the same time."""
    found = 0
    for device, device_spans in spans.items():
        device_spans.sort()
        for (_, end), (start, _) in zip(device_spans, device_spans[1:]):
            if start < end - 1e-3:
                found += 1
    return found


def measure(work, kernel, latency, search, max_inflight=None):
    rows = []
    for devices in (1, 2, 4):
        config = work / "configs"
        config.mkdir(exist_ok=True)
        (config / "scaling.yaml").write_text(
            f"platform: noop\nprovider: replay\nstrategy: beam_search\nsearch: {search}\nmax_rounds: 100\nmax_refinements: 0\n"
            f"noop_eval_s: {EVAL_S}\nreplay_latency_s: {latency}\nnum_workers: {devices}\n"
            "strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n"
            + (f"max_inflight: {max_inflight}\n" if max_inflight else "")
        )
        runs = work / f"runs-{search}-{latency}-{max_inflight}-{devices}"
        subprocess.run(
            [binary, "run", "--strategy", "scaling", "--config-dir", str(config), "--kernel-dir", str(kernel), "--run-dir", str(runs)],
            check=True, stderr=subprocess.DEVNULL,
        )
        run = next(runs.iterdir())
        records = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
        evaluated = [r for r in records if r["type"] == "candidate_finished" and r["candidate"] != 0 and r.get("duplicate_of") is None]
        # The search itself: from round 1's start to the last round's end (the finale after it
        # re-times on one device and is the same work whatever the device count). Steady
        # search's rounds are virtual, N x M candidates each, with the same records.
        begin = min(stamp(r["t"]) for r in records if r["type"] == "round_started")
        end = max(stamp(r["t"]) for r in records if r["type"] == "round_finished")
        wall = end - begin
        spans = spans_by_device(records)
        busy = {device: f"{100 * fraction:.0f}%" for device, fraction in busy_fractions(spans, begin, end).items()}
        rows.append((devices, len(evaluated), wall, 60 * len(evaluated) / wall, busy, overlaps(spans)))
    base = rows[0][3]
    cap = f", max_inflight {max_inflight}" if max_inflight else ""
    print(f"\nreplay latency {latency} s, evaluation {EVAL_S} s (simulated), {CANDIDATES} replayed candidates, beam 2 x 4, search: {search}{cap}\n")
    print("| devices | candidates | wall (s) | candidates/min | vs 1 device | busy fraction per device | overlapping steps on a device |")
    print("|---|---|---|---|---|---|---|")
    for devices, count, wall, rate, busy, overlapping in rows:
        fractions = ", ".join(f"{d}: {f}" for d, f in busy.items())
        print(f"| {devices} | {count} | {wall:.1f} | {rate:.1f} | {rate / base:.2f}x | {fractions} | {overlapping} |")


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    kernel = work / "kernel"
    (kernel / "candidates").mkdir(parents=True)
    (kernel / "input.py").write_text("def kernel_function(x):\n    return x\n")
    (kernel / "problem.py").write_text("class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    for i in range(CANDIDATES):
        (kernel / "candidates" / f"{i:03}.py").write_text(f"def kernel_function(x):\n    return x  # variant {i}\n")
    for latency in (10 * EVAL_S, 0.0):
        for search in ("rounds", "steady"):
            measure(work, kernel, latency, search)
    # Steady search with the LLM allowed enough requests in flight to cover its latency: 32
    # requests of 2 s each deliver a proposal every 1/16 s, faster than four devices evaluate.
    measure(work, kernel, 10 * EVAL_S, "steady", max_inflight=32)
