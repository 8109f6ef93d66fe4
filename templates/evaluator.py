#!/usr/bin/env python3
"""kactors' per-device evaluator: verifies and times Triton candidates against a PyTorch reference.

One long-lived process per GPU worker. kactors starts it with the device pin in its environment
(CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES), a working directory of its own, and stdout/stderr
going to a log; it speaks line-delimited JSON on two dedicated pipes: requests arrive on file
descriptor 3, replies leave on file descriptor 4, one JSON object per line. Nothing a candidate
prints can reach the protocol. docs/evaluator-protocol.md describes every message.

    evaluator.py --kernel-dir DIR --config JSON

Torch and Triton are imported once, the problem's inputs are drawn once per seed directly on the
device, and the reference output of each draw is computed once; after that each request costs
the candidate's compile and runs plus a few milliseconds of checking.

The process kactors starts is a zygote (issue 11): it imports torch and Triton, never makes a
CUDA context and never runs a candidate. It forks the evaluator child, which makes the context,
draws the inputs, computes the references and serves the requests; the zygote relays each
request to it and its reply back, over a socket pair of their own, so the child never holds
descriptors 3 and 4. After every candidate call the child audits its own state (GPU checksums
of every tensor it keeps, the identity of every function and setting a verification depends
on, threads, child processes, GPU memory); a candidate that changed anything is rejected as
having tampered with the evaluator's state, and the child exits. So does it after any
rejection that is not a plain wrong answer, a sticky device error or a crash; the zygote then
forks a fresh child (about a second) and sends kactors its `ready`. Nothing a candidate does
outlives its own evaluation.

This file is the entry point; the evaluator itself is the package kactors_evaluator beside it
(its __init__ lists the modules). How a candidate's module is loaded, its Triton launches seen,
the problem's model and inputs drawn and kernel_function's parameters bound is kernel_call.py's,
beside this file, which the profiled wrapper imports too: a candidate is profiled with the
arguments it was verified with.

`evaluator.py --classify-ops --allowlist FILE OP...` prints which aten operation names the
allowlist accepts, without importing torch: the allowlist logic is tested in CI that way.

Two environment variables exist for tests on a GPU only, never set by kactors:
KACTORS_EVALUATOR_MEMORY_CAP_GIB=G caps the child's device memory at G GiB with
torch.cuda.set_per_process_memory_fraction, to see how a smaller GPU fares, and
KACTORS_EVALUATOR_INTEGRITY=off switches the audit off, to measure what it costs.
"""

import argparse
import json
import os
import sys
from pathlib import Path

# kactors_evaluator and kernel_call.py lie beside this file (a run's tools/, or templates/). No
# __pycache__ is written anywhere: not into the user's kernel directory, not beside this file.
sys.dont_write_bytecode = True
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kactors_evaluator.allowlist import disallowed_ops, load_allowlist  # noqa: E402
from kactors_evaluator.protocol import (  # noqa: E402
    Channel,
    EvaluatorError,
    Settings,
    startup_failed,
)
from kactors_evaluator.zygote import REPLIES_FD, Zygote  # noqa: E402


def classify_ops(allowlist_path, op_names):
    allowlist = load_allowlist(allowlist_path)
    rejected = disallowed_ops(op_names, allowlist)
    print(json.dumps({"allowed": [n for n in op_names if n not in rejected], "rejected": rejected}))
    return 0


def prepared_evaluator(kernel_dir, settings):
    """The evaluator as the zygote holds it: torch and Triton imported, no CUDA context."""
    try:
        from kactors_evaluator import core
    except ImportError as error:
        raise EvaluatorError(
            f"torch or triton is not importable by this Python interpreter: {error}"
        ) from None
    evaluator = core.Evaluator(kernel_dir, settings)
    evaluator.prepare()
    return evaluator, core.serve_child


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-dir", type=Path)
    parser.add_argument("--config", help="JSON object: see docs/evaluator-protocol.md")
    parser.add_argument("--classify-ops", action="store_true")
    parser.add_argument("--allowlist", help="with --classify-ops: the allowlist file")
    parser.add_argument("ops", nargs="*", help="with --classify-ops: aten operation names")
    args = parser.parse_args(argv)
    if args.classify_ops:
        return classify_ops(args.allowlist, args.ops)
    if args.kernel_dir is None or args.config is None:
        parser.error("--kernel-dir and --config are required")
    try:
        settings = Settings(json.loads(args.config))
        evaluator, serve_child = prepared_evaluator(args.kernel_dir.resolve(), settings)
    except (Exception, SystemExit) as error:
        Channel(os.fdopen(REPLIES_FD, "w", encoding="utf-8")).send(startup_failed(error))
        return 2
    zygote = Zygote(lambda connection: serve_child(evaluator, connection), evaluator.fork_hazard)
    return zygote.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
