#!/usr/bin/env python3
"""Issue 18's candidates through an evaluator's own protocol, without kactors: each verified and
timed in one evaluator (templates/evaluator.py, or an older copy), its replies printed as JSON
lines. For trying the evaluator alone and for comparing two side by side (cost.py).

    python3 scripts/h200/issue18/evaluate.py EVALUATOR KERNEL_DIR WORK CANDIDATE...
"""

import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from integrity_overhead import Evaluator, judge  # noqa: E402

ALLOWLIST = Path(__file__).resolve().parents[3] / "data" / "aten_allowlist.yaml"


def staged(work, candidate):
    """A candidate's folder as kactors makes it: its own, with kernel.py."""
    folder = work / Path(candidate).stem
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(candidate, folder / "kernel.py")
    return folder


def main(script, kernel_dir, work, candidates):
    work = Path(work)
    evaluator = Evaluator(script, ALLOWLIST, kernel_dir, work / "evaluator", {})
    print(json.dumps({"ready": evaluator.readies[0]}), flush=True)
    for candidate in candidates:
        verify, time = judge(evaluator, staged(work, candidate))
        print(
            json.dumps({"candidate": Path(candidate).name, "verify": verify, "time": time}),
            flush=True,
        )
    evaluator.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
