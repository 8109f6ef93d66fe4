#!/usr/bin/env python3
"""A stand-in for templates/evaluator.py, for tests without torch or a GPU.

It speaks the evaluator's protocol (docs/evaluator-protocol.md) on the same file descriptors,
requests on 3 and replies on 4, takes the same arguments and checks the same --config keys, and
behaves as markers in the candidate's source tell it. The first line that starts with
`# standin:` decides:

    # standin: pass time_ms=1.5     verify passes; time reports 1.5 ms (default 1.0)
    # standin: fail reason=TEXT     verify fails with that reason
    # standin: reject reason=TEXT   verify passes, time rejects the candidate with that reason
    # standin: crash                the process exits with status 139 in the middle of the request
    # standin: hang                 the request is never answered
    # standin: raise                the request fails (ok false, a traceback); the process lives
    # standin: fatal                the request fails with fatal true; the process exits with 3

A candidate without a marker fails verify. problem.py in the kernel directory may carry
`# standin: eager_ms=3.0 compile_ms=2.0` for time_reference (those are the defaults), and
`# standin: startup_fail` to make start-up fail. It writes noise to stdout and stderr around
every message, to prove that the protocol channel is separate from them. Its ready message
describes a fake device whose uuid is the device pin (CUDA_VISIBLE_DEVICES, else
HIP_VISIBLE_DEVICES) verbatim.
"""

import argparse
import json
import os
import platform
import sys
import threading
import time
import traceback
from pathlib import Path

CONFIG_KEYS = {
    "dtype",
    "atol",
    "rtol",
    "seeds",
    "benchmark_warmup",
    "benchmark_repeat",
    "allowlist",
    "l2_flush_bytes",
}


class StandinError(Exception):
    pass


def markers(path):
    """The key=value settings and the verb of the first `# standin:` line of a file."""
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line.startswith("# standin:"):
            continue
        words = line[len("# standin:") :].strip()
        verb, _, rest = words.partition(" ")
        if "=" in verb:
            verb, rest = None, words
        settings = {}
        if "reason=" in rest:
            before, _, reason = rest.partition("reason=")
            settings["reason"] = reason.strip()
            rest = before
        for word in rest.split():
            key, _, value = word.partition("=")
            settings[key] = value
        return verb, settings
    return None, {}


def noise(where):
    print("standin noise on stdout " + where + " {not json", flush=True)
    print(f"standin noise on stderr {where}", file=sys.stderr, flush=True)


class Standin:
    def __init__(self, kernel_dir, config):
        unknown = sorted(set(config) - CONFIG_KEYS)
        if unknown:
            raise StandinError(f"unknown --config keys {unknown}; accepted: {sorted(CONFIG_KEYS)}")
        allowlist = config.get("allowlist")
        if not isinstance(allowlist, str) or not Path(allowlist).is_file():
            raise StandinError(f"--config allowlist {allowlist!r} is not a file")
        self.seeds = config.get("seeds", 3)
        self.warmup = config.get("benchmark_warmup", 25)
        self.repeat = config.get("benchmark_repeat", 100)
        problem = Path(kernel_dir) / "problem.py"
        if not problem.is_file():
            raise StandinError(f"{problem} does not exist")
        verb, settings = markers(problem)
        if verb == "startup_fail":
            raise StandinError("problem.py asked the stand-in to fail at start-up")
        self.reference_ms = {
            "eager": float(settings.get("eager_ms", 3.0)),
            "compile": float(settings.get("compile_ms", 2.0)),
        }
        self.dtype = config.get("dtype") or "bfloat16"

    def ready(self, setup_s):
        pin = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
        return {
            "type": "ready",
            "device": {"name": "Stand-in GPU", "uuid": pin, "pci_bus_id": None, "index": 0},
            "versions": {
                "python": platform.python_version(),
                "torch": "standin",
                "triton": "standin",
                "cuda": None,
                "hip": None,
                "driver": None,
            },
            "dtype": self.dtype,
            "draws": self.seeds,
            "atol": 0.01,
            "rtol": 0.01,
            "l2_flush_bytes": 268435456,
            "setup_s": setup_s,
        }

    def handle(self, request):
        op = request.get("op")
        if op == "time_reference":
            which = request.get("which")
            if which not in self.reference_ms:
                raise StandinError(f"time_reference which={which!r}; accepted: eager, compile")
            return self.timing(self.reference_ms[which], request, launches=0)
        if op not in ("verify", "time"):
            raise StandinError(
                f"unknown op {op!r}; accepted: verify, time, time_reference, shutdown"
            )
        candidate = Path(request["candidate"])
        if not candidate.is_file():
            raise StandinError(f"candidate {candidate} does not exist")
        verb, settings = markers(candidate)
        if verb == "crash":
            noise("before crashing")
            os._exit(139)
        if verb == "hang":
            noise("before hanging")
            threading.Event().wait()
        if verb == "raise":
            raise RuntimeError("the candidate asked the stand-in to raise")
        if verb == "fatal":
            raise FatalError("CUDA error: an illegal memory access was encountered (stand-in)")
        if op == "verify":
            Path(request["cache_dir"]).mkdir(parents=True, exist_ok=True)
            return self.verdict(verb, settings)
        if verb == "reject":
            return {"passed": False, "reason": settings.get("reason", "rejected by the stand-in")}
        if verb != "pass":
            raise StandinError(f"candidate {candidate} failed verification; it is not timed")
        return self.timing(float(settings.get("time_ms", 1.0)), request, launches=1)

    def verdict(self, verb, settings):
        passed = verb in ("pass", "reject")
        if verb is None:
            reason = "stand-in: no '# standin:' marker in the candidate"
        elif verb == "fail":
            reason = settings.get("reason", "failed by the stand-in")
        elif passed:
            reason = None
        else:
            reason = f"stand-in: unknown marker {verb!r}"
        return {
            "passed": passed,
            "max_abs_err": 0.0 if passed else 1.5,
            "max_rel_err": 0.0 if passed else 0.25,
            "reason": reason,
            "launched": ["standin_kernel"],
            "aten_ops": ["aten.empty.memory_format"],
            "compile_s": 0.01,
            "run_s": 0.001,
        }

    def timing(self, ms, request, launches):
        samples = request.get("repeat")
        samples = self.repeat if samples is None else samples
        return {
            "passed": True,
            "reason": None,
            "median_ms": ms,
            "min_ms": ms * 0.98,
            "max_ms": ms * 1.05,
            "p25_ms": ms * 0.99,
            "p75_ms": ms * 1.01,
            "samples": samples,
            "launches_per_call": launches,
        }


class FatalError(Exception):
    pass


def send(replies, message):
    noise("before a message")
    replies.write(json.dumps(message) + "\n")
    replies.flush()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-dir", type=Path, required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    requests = os.fdopen(3, "r", encoding="utf-8")
    replies = os.fdopen(4, "w", encoding="utf-8")
    try:
        standin = Standin(args.kernel_dir, json.loads(args.config))
    except Exception as error:
        send(
            replies,
            {
                "type": "startup_failed",
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(),
            },
        )
        return 2
    send(replies, standin.ready(round(time.perf_counter() - started, 4)))
    while True:
        line = requests.readline()
        if not line:
            return 0
        started = time.perf_counter()
        request_id = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            if request.get("op") == "shutdown":
                send(replies, {"type": "reply", "id": request_id, "ok": True, "seconds": 0.0})
                return 0
            reply = {"type": "reply", "id": request_id, "ok": True, "seconds": 0.0}
            reply.update(standin.handle(request))
            reply["seconds"] = round(time.perf_counter() - started, 4)
            send(replies, reply)
        except Exception as error:
            fatal = isinstance(error, FatalError)
            send(
                replies,
                {
                    "type": "reply",
                    "id": request_id,
                    "ok": False,
                    "seconds": round(time.perf_counter() - started, 4),
                    "error": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(),
                    "fatal": fatal,
                },
            )
            if fatal:
                return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
