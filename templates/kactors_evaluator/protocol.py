"""The evaluator's protocol shapes (docs/evaluator-protocol.md): the errors a request can end
in, the --config object, the verdict and failure fields of a reply, and the loop that answers
requests on one channel. Needs neither torch nor Triton: the zygote, the stand-in evaluator and
CI's unit tests use it as it is."""

import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import kernel_call

DTYPE_ALIASES = kernel_call.DTYPE_ALIASES
# Every tampering verdict's reason starts with these words; kactors' report counts them.
TAMPERED = "tampered with the evaluator's state"
CONFIG_KEYS = {
    "dtype",
    "atol",
    "rtol",
    "seeds",
    "benchmark_warmup",
    "benchmark_repeat",
    "allowlist",
    "l2_flush_bytes",
    "first_seed",
    "rel_l2",
}


class EvaluatorError(Exception):
    """A request or the start-up configuration that the evaluator cannot carry out."""


class Rejection(Exception):
    """A candidate that ran but broke a rule; the message is the verdict's reason.

    `plain` marks a wrong answer (values, shape, NaN, an output that ignores its inputs): the
    evaluator child goes on after it. After any other rejection the child exits and the zygote
    forks a fresh one, since a candidate that broke a rule may have done more than was seen.
    """

    def __init__(self, message, plain=False):
        super().__init__(message)
        self.plain = plain


class InputsDoNotFit(EvaluatorError):
    """Not even two input draws fit in the device's memory (verification needs two)."""


# ---------------------------------------------------------------------------------------------
# Start-up configuration


class Settings:
    """The --config JSON, checked: every key known, every value of the right kind."""

    def __init__(self, raw):
        if not isinstance(raw, dict):
            raise EvaluatorError("--config must be a JSON object")
        unknown = sorted(set(raw) - CONFIG_KEYS)
        if unknown:
            raise EvaluatorError(
                f"unknown --config keys {unknown}; accepted: {sorted(CONFIG_KEYS)}"
            )
        dtype = raw.get("dtype")
        if dtype is not None and dtype not in DTYPE_ALIASES:
            raise EvaluatorError(f"--config dtype {dtype!r} is not one of {sorted(DTYPE_ALIASES)}")
        self.dtype = DTYPE_ALIASES[dtype] if dtype is not None else None
        self.atol = _optional_number(raw, "atol")
        self.rtol = _optional_number(raw, "rtol")
        self.rel_l2 = _optional_number(raw, "rel_l2")
        self.seeds = _whole(raw, "seeds", 3, minimum=1)
        # The finale's re-check draws seeds no search evaluator used (issue 18).
        self.first_seed = _whole(raw, "first_seed", 0, minimum=0)
        self.benchmark_warmup = _whole(raw, "benchmark_warmup", 25, minimum=0)
        self.benchmark_repeat = _whole(raw, "benchmark_repeat", 100, minimum=1)
        flush = raw.get("l2_flush_bytes")
        self.l2_flush_bytes = None if flush is None else _whole(raw, "l2_flush_bytes", 0, 1)
        if not isinstance(raw.get("allowlist"), str):
            raise EvaluatorError("--config allowlist must be the path of aten_allowlist.yaml")
        self.allowlist_path = raw["allowlist"]


def _optional_number(raw, key):
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise EvaluatorError(f"--config {key} must be a non-negative number, got {value!r}")
    return float(value)


def _whole(raw, key, default, minimum):
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise EvaluatorError(f"--config {key} must be a whole number >= {minimum}, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# How many input draws fit (no torch needed)


# ---------------------------------------------------------------------------------------------
# Reply fields


def unjudged_verdict():
    """A verify reply's verdict fields before anything is known."""
    return {
        "passed": False,
        "max_abs_err": None,
        "max_rel_err": None,
        "rel_l2_err": None,
        "rule": None,
        "reason": None,
        "launched": [],
        "aten_ops": [],
        "compile_s": None,
        "run_s": None,
        "compiled": None,
    }


def failed_reply(error, fatal):
    """The reply to a request that raised; called inside the `except` that caught `error`. A
    fatal one (the device context is unusable) also ends the child."""
    return {
        "ok": False,
        "error": f"{type(error).__name__}: {error}",
        "traceback": traceback.format_exc(),
        "fatal": fatal,
        "restarting": fatal,
    }


def finite_or_none(value):
    return value if value is not None and math.isfinite(value) else None


def rejected(reason, plain=False):
    """A verify or time body for a candidate that broke a rule."""
    return {"passed": False, "reason": reason, "plain": plain}


# ---------------------------------------------------------------------------------------------
# The protocol loop (in the child; the stand-in evaluator uses it too)


class Channel:
    def __init__(self, replies):
        self.replies = replies

    def send(self, message):
        self.replies.write(json.dumps(message, allow_nan=False) + "\n")
        self.replies.flush()


def sanitize(value):
    """JSON has no NaN or Infinity: such a figure is reported as null."""
    if isinstance(value, float):
        return finite_or_none(value)
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v) for v in value]
    return value


def serve(handler, requests, channel):
    """Answers requests until EOF, a shutdown, or a reply after which the child must go.

    handler.handle(request) returns a reply's fields past type and id (`ok` among them);
    handler.failure(error), called inside the `except`, the fields of a failed request. A
    `fatal` reply ends the process at once with status 3 (no CUDA teardown, which could hang),
    a `restarting` one with status 0: the zygote forks a fresh child either way.
    """
    while True:
        line = requests.readline()
        if not line:
            return 0
        started = time.perf_counter()
        request_id = None
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise EvaluatorError(f"a request must be a JSON object, got {line.strip()[:200]!r}")
            request_id = request.get("id")
            if request.get("op") == "shutdown":
                channel.send({"type": "reply", "id": request_id, "ok": True, "seconds": 0.0})
                return 0
            body = handler.handle(request)
        except (Exception, SystemExit) as error:
            body = handler.failure(error)
        reply = {"type": "reply", "id": request_id, "ok": body.pop("ok"), "seconds": 0.0}
        reply.update(sanitize(body))
        reply["seconds"] = round(time.perf_counter() - started, 4)
        channel.send(reply)
        if reply.get("fatal") or reply.get("restarting"):
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(3 if reply.get("fatal") else 0)


def startup_failed(error):
    # The one message the user reads as it is, without the exception's type.
    text = str(error) if isinstance(error, InputsDoNotFit) else f"{type(error).__name__}: {error}"
    return {"type": "startup_failed", "error": text, "traceback": traceback.format_exc()}


def json_object(line):
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def request_header(line):
    """(id, op) of a request line, as the child will read them; (None, None) if unreadable."""
    request = json_object(line)
    return request.get("id"), request.get("op")


def candidate_file(request):
    """The file of the candidate a request names. A sandboxed evaluator may not read the run
    directory's candidates/ (their prompts and replies lie beside the kernels): kactors sends it
    the code, which goes to the named file in its scratch (KACTORS_SCRATCH), in place of the
    copies of the candidates before it. The candidate's TMPDIR is a folder beside its copy, so
    what it leaves there goes with it and the bounded scratch stays free for the next."""
    path = Path(request["candidate"])
    source = request.get("source")
    if source is None:
        return path
    scratch = os.environ.get("KACTORS_SCRATCH")
    if not isinstance(source, str) or not scratch or not path.is_relative_to(scratch):
        raise EvaluatorError(
            f"a request with the candidate's source must name a file in the scratch, got {path}"
        )
    copies = path.parent.parent
    if copies.is_dir():
        for earlier in copies.iterdir():
            if earlier != path.parent:
                shutil.rmtree(earlier, ignore_errors=True)
    (path.parent / "tmp").mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(path.parent / "tmp")
    tempfile.tempdir = None
    path.write_text(source, encoding="utf-8")
    return path
