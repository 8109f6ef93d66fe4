"""The cost of the node agents and srun (issue 14): the same search with 1, 4 and 8 placeholder
GPUs, on one node with the local launcher and over one and two nodes of the Slurm test cluster
(scripts/slurm/cluster.sh) with the slurm launcher, all on this one machine. Each evaluation is
the stand-in evaluator sleeping 0.2 s in its verification (a real process per GPU, the real
evaluator protocol; no torch, no GPU); the replay provider answers at once; steady search.
Reports candidates evaluated per minute, each device's busy fraction and the start-up (from the
command to the search's first round: srun, the agents, their preflight), from the journals.

usage: SLURM_CONF=... python3 scripts/slurm/scaling.py [KACTORS_BINARY]   (repository root, root)
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from journal_spans import busy_fractions, spans_by_device, stamp  # noqa: E402

binary = str(Path(sys.argv[1] if len(sys.argv) > 1 else "target/release/kactors").resolve())
repo = Path(__file__).resolve().parents[2]
# Plays the evaluator (tests/fixtures/standin_evaluator.py) and Python, as in the tests.
STANDIN_PYTHON = repo / "tests" / "fixtures" / "standin-python"
EVAL_S = 0.2
CANDIDATES = 64
# (launcher, nodes, GPUs per node)
SETUPS = [
    ("local", 1, 1),
    ("local", 1, 4),
    ("local", 1, 8),
    ("slurm", 1, 1),
    ("slurm", 1, 4),
    ("slurm", 2, 2),
    ("slurm", 2, 4),
]


def prepare(work):
    bin_dir = work / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\nnode=${SLURMD_NODENAME:-head}\necho 'index, name, uuid, pci.bus_id'\n"
        "for i in 0 1 2 3 4 5 6 7; do echo \"$i, NVIDIA H200, GPU-$node-$i, 00000000:00:0$i.0\"; done\n"
    )
    smi.chmod(0o755)
    kernel = work / "kernel"
    (kernel / "candidates").mkdir(parents=True)
    (kernel / "input.py").write_text("# standin: pass time_ms=2.0\ndef kernel_function(x):\n    return x\n")
    (kernel / "problem.py").write_text(
        "class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n"
    )
    (kernel / "test.py").write_text("")
    for i in range(1, CANDIDATES + 1):
        (kernel / "candidates" / f"{i:03}.py").write_text(
            f"# standin: pass sleep_s={EVAL_S} time_ms={1 + i / 1000}\ndef kernel_function(x):\n    return x * {i}\n"
        )
    return kernel


def measure(work, kernel, launcher, nodes, per_node):
    gpus = nodes * per_node
    config = work / "configs"
    config.mkdir(exist_ok=True)
    (config / "scaling.yaml").write_text(
        f"platform:\n  verifier: nvidia\n  profiler: noop\nprovider: replay\nsearch: steady\nmax_rounds: 100\n"
        f"max_refinements: 0\nlauncher: {launcher}\nnum_workers: {gpus}\nkill_grace_s: 0.5\n"
        "strategy_config:\n  num_top_kernels: 2\n  num_bottlenecks: 4\n"
    )
    runs = work / f"runs-{launcher}-{nodes}x{per_node}"
    env = dict(os.environ, PATH=f"{work / 'bin'}:{os.environ['PATH']}", KACTORS_LOCK_DIR=str(work / "locks"))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    job = None
    if launcher == "slurm":
        granted = subprocess.run(
            ["salloc", f"--nodes={nodes}", f"--gres=gpu:{per_node}", "--no-shell"],
            capture_output=True, text=True, check=True,
        )
        job = granted.stderr.split("Granted job allocation ")[1].split()[0]
        env["SLURM_JOB_ID"] = job
    try:
        started = time.time()
        subprocess.run(
            [binary, "run", "--strategy", "scaling", "--config-dir", str(config), "--kernel-dir", str(kernel),
             "--run-dir", str(runs), "--python", str(STANDIN_PYTHON)],
            check=True, stderr=subprocess.DEVNULL, env=env, cwd=work,
        )
    finally:
        if job:
            subprocess.run(["scancel", job], check=False)
    run = next(path for path in runs.iterdir() if (path / "journal.jsonl").is_file())
    records = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    evaluated = [
        r for r in records
        if r["type"] == "candidate_finished" and r["candidate"] != 0 and r.get("duplicate_of") is None
    ]
    begin = min(stamp(r["t"]) for r in records if r["type"] == "round_started")
    end = max(stamp(r["t"]) for r in records if r["type"] == "round_finished")
    fractions = busy_fractions(spans_by_device(records), begin, end)
    return gpus, len(evaluated), end - begin, 60 * len(evaluated) / (end - begin), fractions, begin - started


with tempfile.TemporaryDirectory() as work:
    work = Path(work)
    kernel = prepare(work)
    print(
        f"\n{CANDIDATES} candidates, each verified in {EVAL_S} s by the stand-in evaluator (a process per GPU), "
        "replay answering at once, steady search, beam 2 x 4\n"
    )
    print("| launcher | nodes x GPUs | GPUs | candidates | search (s) | candidates/min | busy fraction per device (min-max, mean) | start-up (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for launcher, nodes, per_node in SETUPS:
        gpus, count, wall, rate, fractions, startup = measure(work, kernel, launcher, nodes, per_node)
        values = list(fractions.values())
        spread = f"{100 * min(values):.0f}-{100 * max(values):.0f}%, {100 * sum(values) / len(values):.0f}%"
        print(f"| {launcher} | {nodes} x {per_node} | {gpus} | {count} | {wall:.1f} | {rate:.1f} | {spread} | {startup:.1f} |")
