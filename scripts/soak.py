"""The noop soaks of issue 24 ("a flat cost per candidate"): a search of N candidates on the
noop platform (4 simulated devices, beam 4 x 5, 2 ms evaluations, the replay provider answering
at once from as many distinct candidate files), then the same run killed at its middle and
resumed, for each binary and each N given, side by side in one table. Prints what the issue asks
to be flat or bounded:

- CPU per candidate: user and system of the kactors process over candidates made (system time
  is mostly the file system creating each candidate's folder and files: run it on tmpfs,
  `TMPDIR=/dev/shm`, to leave the disk's own cost out), and the time per 1,000 candidates from
  the journal's `candidate_finished` stamps, first block to last (the guard: 1.3 at most);
- max RSS, the journal's bytes per candidate and the share of them in `proposal_received`,
  report.html's size at the end, the wall time;
- for the resume: the seconds from its start to `run_resumed` and to its first dispatch (the
  first `step_started` after it), and that over the candidates folded.

usage: python3 scripts/soak.py [--binary LABEL=PATH]... [--candidates N]...
(from the repository root; default one binary, `new=target/release/kactors`, and 10000 and
100000 candidates: a binary labelled `old-*` runs only the smallest N). The kill at the middle is
KACTORS_TEST_ABORT_AT's, which a build of the current code reads only with the test-hooks
feature: `cargo build --release --features test-hooks`. Nothing but the temporary folder is
written.
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

BEAM, BOTTLENECKS, DEVICES, EVAL_S = 4, 5, 4, 0.002
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "optimize_01_matvec"


def stamp(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


def records_of(run):
    return [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines() if line.strip()]


def kactors(binary, args, env=None):
    """Runs kactors to its end, alone among this script's children: its user and system CPU
    seconds, its max RSS in MB and the wall seconds it took. GNU time starts it: a child forked
    from this script would count this script's memory (the journals it read) in its max RSS."""
    started = time.monotonic()
    with tempfile.NamedTemporaryFile("r") as rss:
        child = subprocess.Popen(
            ["/usr/bin/time", "-f", "%M", "-o", rss.name, binary, *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        )
        _, _, usage = os.wait4(child.pid, 0)
        max_rss_kib = int(rss.read().split()[-1])
    return usage.ru_utime, usage.ru_stime, max_rss_kib / 1024, time.monotonic() - started


def per_thousand(records):
    """Seconds per 1,000 candidates finished, block by block."""
    stamps = sorted(stamp(r["t"]) for r in records if r["type"] == "candidate_finished")
    return [stamps[start + 999] - stamps[start] for start in range(0, len(stamps) - 999, 1000)]


def workspace(work, candidates):
    kernel = work / "kernel"
    (kernel / "candidates").mkdir(parents=True)
    # The matvec example's files: the noop platform runs none of them.
    for name in ("input.py", "problem.py", "test.py"):
        shutil.copy(EXAMPLE / name, kernel / name)
    for i in range(candidates + 1):
        # Each a different token stream: variants differing only in comments are duplicates.
        (kernel / "candidates" / f"{i:06d}.py").write_text(
            f"def kernel_function(x):\n    return x * {i + 1} / {i + 1}\n"
        )
    rounds = -(-candidates // (BEAM * BOTTLENECKS))
    (work / "soak.yaml").write_text(
        f"platform: noop\nprovider: replay\nstrategy: beam_search\nmax_rounds: {rounds}\n"
        f"max_candidates: {candidates}\nmax_refinements: 0\nnoop_eval_s: {EVAL_S}\nreplay_latency_s: 0\n"
        f"num_workers: {DEVICES}\nstrategy_config:\n  num_top_kernels: {BEAM}\n  num_bottlenecks: {BOTTLENECKS}\n"
    )


def run_args(work, runs):
    return ["run", "--strategy", "soak", "--config-dir", str(work), "--kernel-dir", str(work / "kernel"), "--run-dir", str(runs)]


def soak(binary, candidates):
    """One soak's figures, by row name."""
    figures = {}
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        workspace(work, candidates)
        user, system, rss, wall = kactors(binary, run_args(work, work / "runs"))
        run = next((work / "runs").iterdir())
        records = records_of(run)
        made = max(sum(1 for r in records if r["type"] == "candidate_finished"), 1)
        journal = (run / "journal.jsonl").read_bytes()
        proposals = sum(len(line) + 1 for line in journal.splitlines() if b'"type":"proposal_received"' in line)
        blocks = per_thousand(records)
        html = run / "report.html"
        figures["candidates made"] = f"{made}"
        figures["CPU per candidate: user + system"] = f"{1000 * (user + system) / made:.2f} ms ({1000 * user / made:.2f} + {1000 * system / made:.2f})"
        figures["max RSS"] = f"{rss:.1f} MB"
        figures["journal"] = f"{len(journal) / 1e6:.1f} MB ({len(journal) / made / 1000:.2f} kB per candidate; proposal_received {100 * proposals / max(len(journal), 1):.0f}%)"
        figures["report.html at the end"] = f"{html.stat().st_size / 1e6:.2f} MB" if html.exists() else "none"
        figures["wall"] = f"{wall:.1f} s"
        if blocks:
            figures["time per 1,000 candidates, first to last block"] = f"{blocks[0]:.2f} s to {blocks[-1]:.2f} s (ratio {blocks[-1] / blocks[0]:.2f})"
        shutil.rmtree(work / "runs")

        # The same run killed at its middle, then resumed: how long before it works again.
        runs = work / "runs-resumed"
        env = dict(os.environ, KACTORS_TEST_ABORT_AT=f"candidate_finished:{made // 2}")
        kactors(binary, run_args(work, runs), env=env)
        run = next(runs.iterdir())
        folded = max(sum(1 for r in records_of(run) if r["type"] == "candidate_finished"), 1)
        started = time.time()
        _, _, rss, wall = kactors(binary, ["resume", str(run)])
        records = records_of(run)
        resumed_at = next((i for i, r in enumerate(records) if r["type"] == "run_resumed"), None)
        if resumed_at is None:
            figures["resume"] = "no run_resumed record"
            return figures
        first_dispatch = next((stamp(r["t"]) for r in records[resumed_at:] if r["type"] == "step_started"), None)
        figures["resume: candidates folded"] = f"{folded}"
        figures["resume: to `run_resumed`"] = f"{stamp(records[resumed_at]['t']) - started:.2f} s"
        if first_dispatch is not None:
            figures["resume: to its first dispatch"] = f"{first_dispatch - started:.2f} s ({1000 * (first_dispatch - started) / folded:.3f} ms per candidate folded)"
        figures["resume: max RSS, wall to the end"] = f"{rss:.1f} MB, {wall:.1f} s"
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", action="append", metavar="LABEL=PATH")
    parser.add_argument("--candidates", action="append", type=int, metavar="N")
    options = parser.parse_args()
    binaries = [b.split("=", 1) for b in (options.binary or ["new=target/release/kactors"])]
    sizes = sorted(options.candidates or [10000, 100000])
    columns = []
    for label, path in binaries:
        for size in sizes:
            if label.startswith("old") and size != sizes[0]:
                continue
            print(f"soaking {label} ({path}) with {size} candidates", flush=True)
            columns.append((f"{label}, {size}", soak(os.path.abspath(path), size)))
    print(f"\nnoop soak: {DEVICES} devices, beam {BEAM} x {BOTTLENECKS}, {EVAL_S * 1000:g} ms evaluations, TMPDIR={tempfile.gettempdir()}\n")
    rows = list(dict.fromkeys(row for _, figures in columns for row in figures))
    print("| figure | " + " | ".join(name for name, _ in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in rows:
        print(f"| {row} | " + " | ".join(figures.get(row, "–") for _, figures in columns) + " |")


main()
