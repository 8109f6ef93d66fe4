#!/usr/bin/env python3
"""A stand-in for templates/evaluator.py, for tests without torch or a GPU.

It speaks the evaluator's protocol (docs/evaluator-protocol.md) on the same file descriptors,
requests on 3 and replies on 4, takes the same arguments and checks the same --config keys, and
behaves as markers in the candidate's source tell it. Like the real evaluator it is a zygote
(the real one's code, imported from evaluator.py beside this file) that forks a child to serve
the requests and forks a fresh one when a child exits. The first line that starts with
`# standin:` decides:

    # standin: pass time_ms=1.5     verify passes; time reports 1.5 ms (default 1.0)
    # standin: fail reason=TEXT     verify fails with that reason (a plain wrong answer)
    # standin: reject reason=TEXT   verify passes, time rejects the candidate with that reason
    # standin: crash                the child exits with status 139 in the middle of the request
    # standin: hang                 the request is never answered
    # standin: raise                the request fails (ok false, a traceback); the child restarts
    # standin: fatal                the request fails with fatal true; the child exits with 3
    # standin: tamper what=TEXT     the candidate damages the child's state (its references);
                                    the child's audit sees it: verify says "tampered with the
                                    evaluator's state: TEXT" and the child restarts. A child
                                    that went on would fail every later candidate, as a real
                                    one comparing with zeroed references did (issue 11)
    # standin: forge_checksums      verify passes, but the reply's checksums differ from those
                                    of the ready message, as if the candidate had rewritten the
                                    child's own audit: only kactors' comparison can catch it
    # standin: write_channel        the candidate writes a line of its own into the reply
                                    channel before the child's reply
    # standin: orphan pidfile=PATH  the candidate leaves a process running in a session of its
                                    own (its pid written to PATH); verify rejects it (not a
                                    plain wrong answer), the child restarts and the zygote ends
                                    the orphan

A candidate without a marker fails verify. problem.py in the kernel directory may carry
`# standin: eager_ms=3.0 compile_ms=2.0` for time_reference (those are the defaults),
`# standin: draws=2` (the inputs fit only twice: the ready message says 2 draws of 3 seeds),
`# standin: no_fit` (not even two draws fit: start-up fails with the evaluator's message) and
`# standin: startup_fail`. It writes noise to stdout and stderr around every message, to prove
that the protocol channel is separate from them. Its ready message describes a fake device
whose uuid is the device pin (CUDA_VISIBLE_DEVICES, else HIP_VISIBLE_DEVICES) verbatim.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evaluator  # noqa: E402  (the real zygote and protocol loop, beside this file)

CONFIG_KEYS = evaluator.CONFIG_KEYS
# What the stand-in's ready message says it keeps, and the checksums it reports for them.
TENSORS = ["draw 0 input 0", "draw 0 reference 0", "draw 1 input 0", "draw 1 reference 0"]
CHECKSUMS = ["00000000000000a1", "00000000000000b2", "00000000000000c3", "00000000000000d4"]
GIB = 1 << 30


class StandinError(Exception):
    pass


class FatalError(Exception):
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
        for name in ("reason", "what"):
            if f"{name}=" in rest:
                before, _, text = rest.partition(f"{name}=")
                settings[name] = text.strip()
                rest = before
        for word in rest.split():
            key, _, value = word.partition("=")
            settings[key] = value
        return verb, settings
    return None, {}


def noise(where):
    print("standin noise on stdout " + where + " {not json", flush=True)
    print(f"standin noise on stderr {where}", file=sys.stderr, flush=True)


class NoisyChannel(evaluator.Channel):
    def send(self, message):
        noise("before a message")
        super().send(message)


class Standin:
    """One stand-in child: what a real child holds, reduced to whether a candidate damaged it."""

    def __init__(self, kernel_dir, config, connection):
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
        if verb == "no_fit":
            raise evaluator.InputsDoNotFit(
                "the problem's inputs do not fit on Stand-in GPU: 30.0 GiB needed, 20.0 GiB free"
            )
        self.draws = int(settings.get("draws", self.seeds))
        self.reference_ms = {
            "eager": float(settings.get("eager_ms", 3.0)),
            "compile": float(settings.get("compile_ms", 2.0)),
        }
        self.dtype = config.get("dtype") or "bfloat16"
        self.connection = connection
        # What a candidate broke in this child; a real child's references zeroed, say.
        self.damage = None

    def ready(self, setup_s):
        pin = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES")
        needed = [n * 10 * GIB for n in range(1, self.seeds + 1)]
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
            "draws": self.draws,
            "seeds": self.seeds,
            "memory": {
                "available_bytes": needed[self.draws - 1] + GIB,
                "needed_bytes": needed,
                "inputs_bytes": 4 * GIB,
                "outputs_bytes": 4096,
                "first_draw_peak_bytes": 12 * GIB,
                "flush_bytes": 268435456,
            },
            "atol": 0.01,
            "rtol": 0.01,
            "l2_flush_bytes": 268435456,
            "integrity": {"tensors": TENSORS, "checksums": CHECKSUMS},
            "setup_s": setup_s,
        }

    def failure(self, error):
        fatal = isinstance(error, FatalError)
        return {
            "ok": False,
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
            "fatal": fatal,
            # A candidate that raised may have done more: the child restarts, as the real one.
            "restarting": fatal or isinstance(error, CandidateRaised),
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
        reply = self.run_candidate(op, verb, settings, request)
        reply.setdefault("restarting", False)
        if self.damage is not None:
            # What the real child's audit does after every candidate call.
            found = self.damage
            reason = f"{evaluator.TAMPERED}: {found}"
            verdict = evaluator.unjudged_verdict() if op == "verify" else {}
            verdict.update(passed=False, reason=reason)
            reply = {"ok": True, **verdict, "tampered": found, "restarting": True}
        checksums = list(CHECKSUMS)
        if verb == "forge_checksums":
            checksums[1] = "0000000000000000"
        reply["integrity"] = {"checksums": checksums, "audit_s": 0.0}
        return reply

    def run_candidate(self, op, verb, settings, request):
        if verb == "crash":
            noise("before crashing")
            os._exit(139)
        if verb == "hang":
            noise("before hanging")
            threading.Event().wait()
        if verb == "raise":
            raise CandidateRaised("the candidate asked the stand-in to raise")
        if verb == "fatal":
            raise FatalError("CUDA error: an illegal memory access was encountered (stand-in)")
        if verb == "tamper":
            self.damage = settings.get("what", "draw 0 reference 0 changed (stand-in)")
        if verb == "write_channel":
            self.connection.sendall(b'{"type":"reply","note":"written by the candidate"}\n')
        if verb == "orphan":
            # A process in a session of its own: a process-group kill would not reach it.
            orphan = subprocess.Popen(
                [sys.executable, "-c", "import time\nwhile True:\n    time.sleep(3600)\n"],
                start_new_session=True,
            )
            Path(settings["pidfile"]).write_text(str(orphan.pid))
            if op == "verify":
                reply = {"ok": True, **self.verdict("fail", {"reason": "left a process"})}
                reply["restarting"] = True
                return reply
        if self.damage is not None and verb in ("pass", "reject", None):
            # Compared with damaged references, even a right answer is wrong.
            verb, settings = "fail", {"reason": "2048 of 2048 output elements exceed atol=0.01"}
        if op == "verify":
            Path(request["cache_dir"]).mkdir(parents=True, exist_ok=True)
            passing = "pass" if verb in ("tamper", "forge_checksums", "write_channel") else verb
            return {"ok": True, **self.verdict(passing, settings)}
        if verb == "reject":
            reason = settings.get("reason", "rejected by the stand-in")
            return {"ok": True, "passed": False, "reason": reason, "restarting": True}
        if verb not in ("pass", "forge_checksums"):
            raise StandinError(
                f"candidate {request['candidate']} failed verification; it is not timed"
            )
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
            "ok": True,
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


class CandidateRaised(Exception):
    pass


def standin_child(kernel_dir, config, connection):
    started = time.perf_counter()
    requests = connection.makefile("r", encoding="utf-8")
    channel = NoisyChannel(connection.makefile("w", encoding="utf-8"))
    try:
        standin = Standin(kernel_dir, config, connection)
    except Exception as error:
        channel.send(evaluator.startup_failed(error))
        return 2
    channel.send(standin.ready(round(time.perf_counter() - started, 4)))
    return evaluator.serve(standin, requests, channel)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-dir", type=Path, required=True)
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    try:
        config = json.loads(args.config)
    except ValueError as error:
        NoisyChannel(os.fdopen(4, "w", encoding="utf-8")).send(evaluator.startup_failed(error))
        return 2
    zygote = evaluator.Zygote(lambda connection: standin_child(args.kernel_dir, config, connection))
    return zygote.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
