#!/usr/bin/env python3
"""Issue 11's cost and issue 10's memory item, through the evaluator's own protocol.

    python3 scripts/h200/integrity_overhead.py overhead EVALUATOR ALLOWLIST WORK KERNEL_DIR...
    python3 scripts/h200/integrity_overhead.py memory EVALUATOR ALLOWLIST WORK KERNEL_DIR CAP_GIB

overhead: per kernel directory, two evaluators side by side on the one GPU, one with the
integrity audit and one without (KACTORS_EVALUATOR_INTEGRITY=off, a switch for this measurement
only). Every candidate of the directory that passes (input.py and candidates/0*.py) is verified
once in each to compile it, then verified and timed in both, alternating which goes first, three
rounds. The added seconds per candidate is (verify + time with the audit) - (without), paired;
the median and the largest are reported, with the audit's own seconds as the child measured them
and the setup of a fresh child after a candidate that raises (the restart). Prints one JSON
object per directory, then PASS/FAIL lines (the added time must stay <= 0.3 s).

memory: one evaluator whose device memory is capped at CAP_GIB (KACTORS_EVALUATOR_MEMORY_CAP_GIB,
a test switch); prints its ready message's draws and memory plan and verifies and times input.py,
then `PASS`/`FAIL` that it kept two draws of three and the kernel passed.
"""

import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 0.3


class Evaluator:
    def __init__(self, script, allowlist, kernel_dir, work, env):
        work.mkdir(parents=True, exist_ok=True)
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()

        def place_pipes():
            a, b = os.dup(requests_read), os.dup(replies_write)
            os.dup2(a, 3)
            os.dup2(b, 4)

        config = json.dumps({"allowlist": os.path.abspath(allowlist)})
        self.log = open(work / "evaluator.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(script), "--kernel-dir", os.path.abspath(kernel_dir)]
            + ["--config", config],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=self.log,
            preexec_fn=place_pipes,
            close_fds=False,
            cwd=work,
            start_new_session=True,
            env=dict(os.environ, **env),
        )
        os.close(requests_read)
        os.close(replies_write)
        self.requests = os.fdopen(requests_write, "w")
        # Read raw, not through a buffered file: select() cannot see lines already buffered.
        self.replies = replies_read
        self.pending = b""
        self.next_id = 0
        self.readies = [self.line(600)]

    def line(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.replies], [], [], max(left, 0))
            chunk = os.read(self.replies, 1 << 16) if ready else b""
            if not chunk:
                return {"type": "lost", "error": "no line"}
            self.pending += chunk
        text, self.pending = self.pending.split(b"\n", 1)
        return json.loads(text)

    def ask(self, request, timeout=300):
        self.next_id += 1
        self.requests.write(json.dumps(dict(request, id=self.next_id)) + "\n")
        self.requests.flush()
        while True:
            message = self.line(timeout)
            if message.get("type") == "ready":
                self.readies.append(message)
                continue
            return message

    def close(self):
        self.ask({"op": "shutdown"}, timeout=30)
        self.process.wait(timeout=60)


def candidates_of(kernel_dir):
    paths = [kernel_dir / "input.py"] + sorted((kernel_dir / "candidates").glob("0*.py"))
    return [p for p in paths if p.is_file()]


def judge(evaluator, folder):
    kernel = str(folder / "kernel.py")
    verify = evaluator.ask({"op": "verify", "candidate": kernel, "cache_dir": str(folder / "tc")})
    if not verify.get("passed"):
        return verify, None
    return verify, evaluator.ask({"op": "time", "candidate": kernel})


def overhead(script, allowlist, work, kernel_dirs):
    failures = 0
    for kernel_dir in map(Path, kernel_dirs):
        name = kernel_dir.name
        sides = {
            "on": Evaluator(script, allowlist, kernel_dir, work / name / "on", {}),
            "off": Evaluator(
                script,
                allowlist,
                kernel_dir,
                work / name / "off",
                {"KACTORS_EVALUATOR_INTEGRITY": "off"},
            ),
        }
        folders = {}
        for path in candidates_of(kernel_dir):
            for side in sides:
                folder = work / name / side / "candidates" / path.stem
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, folder / "kernel.py")
                folders[(path.stem, side)] = folder
        stems = sorted({stem for stem, _ in folders})
        for stem in stems:
            for side, evaluator in sides.items():
                judge(evaluator, folders[(stem, side)])  # compile and autotune, not measured
        added, audits, rows = [], [], []
        for round_index in range(3):
            for stem in stems:
                order = (
                    ["on", "off"] if (round_index + stems.index(stem)) % 2 == 0 else ["off", "on"]
                )
                seconds = {}
                for side in order:
                    verify, timed = judge(sides[side], folders[(stem, side)])
                    if timed is None or not timed.get("passed"):
                        seconds[side] = None
                        rows.append(
                            {"candidate": stem, "side": side, "verify": verify, "time": timed}
                        )
                        continue
                    seconds[side] = verify["seconds"] + timed["seconds"]
                    if side == "on":
                        audits.append(
                            verify["integrity"]["audit_s"] + timed["integrity"]["audit_s"]
                        )
                if None not in seconds.values():
                    added.append(seconds["on"] - seconds["off"])
                    rows.append({"candidate": stem, "round": round_index, **seconds})
        # A fresh child's cost: a candidate that raises makes the child restart.
        raising = work / name / "on" / "candidates" / "raises"
        raising.mkdir(parents=True, exist_ok=True)
        (raising / "kernel.py").write_text(
            "def kernel_function(*args, **kwargs):\n    raise RuntimeError('on purpose')\n"
        )
        started = time.perf_counter()
        raised = judge(sides["on"], raising)[0]
        again = judge(sides["on"], folders[(stems[0], "on")])
        restart_wall = time.perf_counter() - started
        fresh = sides["on"].readies[-1]
        for evaluator in sides.values():
            evaluator.close()
        result = {
            "kernel_dir": str(kernel_dir),
            "pairs": len(added),
            "added_s_median": statistics.median(added) if added else None,
            "added_s_max": max(added) if added else None,
            "audit_s_median": statistics.median(audits) if audits else None,
            "audit_s_max": max(audits) if audits else None,
            "restart": {
                "raised_reply_restarting": raised.get("restarting"),
                "fresh_generation": fresh.get("generation"),
                "fresh_setup_s": fresh.get("setup_s"),
                "raise_then_next_candidate_wall_s": round(restart_wall, 3),
                "next_candidate_passed": again[0].get("passed"),
            },
            "rows": rows,
        }
        print(json.dumps(result), flush=True)
        ok = bool(added) and max(added) <= BUDGET_S
        failures += not ok
        print(
            f"{'PASS' if ok else 'FAIL'} {name}: added time per candidate with the audit "
            f"median {result['added_s_median']}, max {result['added_s_max']} s (budget {BUDGET_S} s)",
            file=sys.stderr,
            flush=True,
        )
    return 1 if failures else 0


def memory(script, allowlist, work, kernel_dir, cap_gib):
    kernel_dir = Path(kernel_dir)
    evaluator = Evaluator(
        script,
        allowlist,
        kernel_dir,
        work / "memory",
        {"KACTORS_EVALUATOR_MEMORY_CAP_GIB": cap_gib},
    )
    ready = evaluator.readies[0]
    folder = work / "memory" / "candidates" / "input"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(kernel_dir / "input.py", folder / "kernel.py")
    verify, timed = judge(evaluator, folder) if ready.get("type") == "ready" else (ready, None)
    evaluator.close()
    print(json.dumps({"ready": ready, "verify": verify, "time": timed}), flush=True)
    ok = (
        ready.get("draws") == 2
        and ready.get("seeds") == 3
        and verify.get("passed") is True
        and (timed or {}).get("passed") is True
    )
    print(
        f"{'PASS' if ok else 'FAIL'} memory capped at {cap_gib} GiB: {ready.get('draws')} of "
        f"{ready.get('seeds')} draws kept, input.py passed={verify.get('passed')} and timed="
        f"{(timed or {}).get('passed')} ({ready.get('error', '')})",
        file=sys.stderr,
        flush=True,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    mode, script, allowlist, work = sys.argv[1:5]
    if mode == "overhead":
        sys.exit(overhead(script, allowlist, Path(work), sys.argv[5:]))
    sys.exit(memory(script, allowlist, Path(work), sys.argv[5], sys.argv[6]))
