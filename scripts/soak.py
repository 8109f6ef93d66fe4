"""The noop soak of issue 24 ("a flat cost per candidate"): one search of CANDIDATES candidates
on the noop platform (4 simulated devices, beam 4 x 5, 2 ms evaluations, the replay provider
answering at once from as many distinct candidate files), then the same run killed at its
middle and resumed. Prints what the issue asks to be flat or bounded:

- CPU per candidate (user + system of the kactors process, over candidates made), and the time
  per 1,000 candidates from the journal's `candidate_finished` stamps, first block to last (the
  ratio of the last to the first is the soak's guard: 1.3 at most);
- max RSS, the journal's bytes per candidate and the share of them in `proposal_received`,
  report.html's size at the end, the wall time;
- for the resume: the seconds from its start to `run_resumed` and to its first dispatch (the
  first `step_started` after it), and the fold's cost per candidate folded.

usage: python3 scripts/soak.py [KACTORS_BINARY [CANDIDATES]]   (from the repository root;
default target/release/kactors, 10000). The kill at the middle is KACTORS_TEST_ABORT_AT's, which
only a build with the test-hooks feature reads: `cargo build --release --features test-hooks`.
Nothing but the temporary folder is written.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/kactors")
CANDIDATES = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
BEAM, BOTTLENECKS, DEVICES, EVAL_S = 4, 5, 4, 0.002
ROUNDS = -(-CANDIDATES // (BEAM * BOTTLENECKS))
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "optimize_01_matvec"


def stamp(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def records_of(run):
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines() if line.strip()]


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def kactors(args, env=None):
    """Runs kactors to its end; its CPU seconds and the wall seconds it took."""
    cpu_before, _ = children_cpu()
    started = time.monotonic()
    subprocess.run([binary, *args], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.monotonic() - started
    cpu_after, _ = children_cpu()
    return cpu_after - cpu_before, wall


def per_thousand(records):
    """Seconds per 1,000 candidates finished, block by block."""
    stamps = sorted(stamp(r["t"]) for r in records if r["type"] == "candidate_finished")
    blocks = []
    for start in range(0, len(stamps) - 1000 + 1, 1000):
        blocks.append(stamps[start + 999] - stamps[start])
    return blocks


def workspace(work):
    kernel = work / "kernel"
    (kernel / "candidates").mkdir(parents=True)
    # The matvec example's files: the noop platform runs none of them.
    for name in ("input.py", "problem.py", "test.py"):
        shutil.copy(EXAMPLE / name, kernel / name)
    for i in range(CANDIDATES + 1):
        # Each a different token stream: variants differing only in comments are duplicates.
        (kernel / "candidates" / f"{i:06d}.py").write_text(
            f"def kernel_function(x):\n    return x * {i + 1} / {i + 1}\n"
        )
    (work / "soak.yaml").write_text(
        f"platform: noop\nprovider: replay\nstrategy: beam_search\nmax_rounds: {ROUNDS}\n"
        f"max_candidates: {CANDIDATES}\nmax_refinements: 0\nnoop_eval_s: {EVAL_S}\nreplay_latency_s: 0\n"
        f"num_workers: {DEVICES}\nstrategy_config:\n  num_top_kernels: {BEAM}\n  num_bottlenecks: {BOTTLENECKS}\n"
    )
    return kernel


def run_args(work, runs):
    return ["run", "--strategy", "soak", "--config-dir", str(work), "--kernel-dir", str(work / "kernel"), "--run-dir", str(runs)]


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    workspace(work)

    runs = work / "runs"
    cpu, wall = kactors(run_args(work, runs))
    _, max_rss_kib = children_cpu()
    run = next(runs.iterdir())
    records = records_of(run)
    made = sum(1 for r in records if r["type"] == "candidate_finished")
    journal = (run / "journal.jsonl").read_bytes()
    proposals = sum(len(line) + 1 for line in journal.splitlines() if b'"type":"proposal_received"' in line)
    blocks = per_thousand(records)
    html = run / "report.html"
    print(f"noop soak: {made} candidates, {DEVICES} devices, beam {BEAM} x {BOTTLENECKS}, {EVAL_S * 1000:g} ms evaluations ({binary})\n")
    print("| figure | value |")
    print("|---|---|")
    print(f"| CPU per candidate | {1000 * cpu / max(made, 1):.2f} ms |")
    print(f"| max RSS | {max_rss_kib / 1024:.1f} MB |")
    print(f"| journal | {len(journal) / 1e6:.1f} MB ({len(journal) / max(made, 1) / 1000:.2f} kB per candidate; proposal_received {100 * proposals / max(len(journal), 1):.0f}%) |")
    print(f"| report.html at the end | {html.stat().st_size / 1e6:.2f} MB |" if html.exists() else "| report.html | none |")
    print(f"| wall | {wall:.1f} s |")
    if blocks:
        print(f"| time per 1,000 candidates, first to last block | {blocks[0]:.1f} s to {blocks[-1]:.1f} s (ratio {blocks[-1] / blocks[0]:.2f}) |")

    # The same run killed at its middle, then resumed: how long before it works again.
    half = made // 2
    runs = work / "runs-resumed"
    env = dict(os.environ, KACTORS_TEST_ABORT_AT=f"candidate_finished:{half}")
    kactors(run_args(work, runs), env=env)
    run = next(runs.iterdir())
    folded = sum(1 for r in records_of(run) if r["type"] == "candidate_finished")
    started = time.time()
    cpu, wall = kactors(["resume", str(run)])
    records = records_of(run)
    resumed_at = next(i for i, r in enumerate(records) if r["type"] == "run_resumed")
    first_dispatch = next(
        (stamp(r["t"]) for r in records[resumed_at:] if r["type"] == "step_started"), None
    )
    print(f"| resume of a run killed after {folded} candidates: to `run_resumed` | {stamp(records[resumed_at]['t']) - started:.2f} s |")
    if first_dispatch is not None:
        print(f"| resume: to its first dispatch | {first_dispatch - started:.2f} s ({1000 * (first_dispatch - started) / max(folded, 1):.3f} ms per candidate folded) |")
    print(f"| resume: wall to the end | {wall:.1f} s |")
