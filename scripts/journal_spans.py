"""What the measurement scripts share: a kernel directory of replay candidates, a run of kactors
on it, and what they read from its journal (its records with each candidate's placement put
back, record times and each device's busy spans)."""

import json
import subprocess
from datetime import datetime


def replay_kernel(work, count):
    """A kernel directory under `work` with a trivial input.py and problem.py and `count` replay
    candidates, each a different token stream (variants differing only in comments are
    duplicates)."""
    kernel = work / "kernel"
    (kernel / "candidates").mkdir(parents=True)
    (kernel / "input.py").write_text("def kernel_function(x):\n    return x\n")
    (kernel / "problem.py").write_text("class Model:\n    pass\ndef get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")
    for i in range(count):
        (kernel / "candidates" / f"{i:03}.py").write_text(f"def kernel_function(x):\n    return x * {i + 1} / {i + 1}\n")
    return kernel


def run_kactors(binary, work, name, strategy, kernel):
    """`kactors run` of the strategy file text `strategy` on `kernel`, its run in runs-NAME under
    `work`; the run's journal records."""
    config = work / "configs"
    config.mkdir(exist_ok=True)
    (config / "measured.yaml").write_text(strategy)
    runs = work / f"runs-{name}"
    subprocess.run(
        [binary, "run", "--strategy", "measured", "--config-dir", str(config), "--kernel-dir", str(kernel), "--run-dir", str(runs)],
        check=True, stderr=subprocess.DEVNULL,
    )
    return records_of(next(runs.iterdir()))


PLACEMENT = ("parent", "round", "device")


def records_of(run):
    """A run directory's journal records, each candidate's placement put back where a line left
    it out as the line before said it (docs/journal.md, schema 5: `parent`, `round` and `device`
    are said on a candidate's first line of each process)."""
    records, placements = [], {}
    for line in (run / "journal.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "candidate" in record and record["type"] != "run_resumed":
            placement = placements.setdefault(record["candidate"], {})
            for key in PLACEMENT:
                if key in record:
                    placement[key] = record[key]
                elif key in placement:
                    record[key] = placement[key]
        records.append(record)
    return records


def stamp(text):
    """A journal time (2026-12-02T10:35:44.123Z) as seconds since the epoch."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def spans_by_device(records):
    """Each device's steps as (start, end) seconds, from step_started and step_finished."""
    spans, open_steps = {}, {}
    for r in records:
        key = (r.get("device"), r.get("candidate"), r.get("step"))
        if r["type"] == "step_started":
            open_steps[key] = stamp(r["t"])
        elif r["type"] == "step_finished" and key in open_steps:
            spans.setdefault(r["device"], []).append((open_steps.pop(key), stamp(r["t"])))
    return spans


def busy_fractions(spans, begin, end):
    """Each device's time busy within [begin, end], over that window."""
    wall = end - begin
    return {
        device: sum(max(0.0, min(b, end) - max(a, begin)) for a, b in device_spans) / wall
        for device, device_spans in sorted(spans.items())
    }
