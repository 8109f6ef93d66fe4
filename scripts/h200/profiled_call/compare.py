#!/usr/bin/env python3
"""Checks scripts/h200/profiled_call.sh (issue 12): the call the profiler measured got exactly
the arguments of the call the evaluator verified. Prints one line per check, `PASS <what>` or
`FAIL <what>: <exactly what differed>`, and exits 1 when any check failed.

    python3 compare.py KERNEL RUN_DIR RUN_RECORD PROFILE_JSON PROFILE_RECORD

KERNEL is the candidate's file (its SHA-256 picks its records out); RUN_DIR the run's directory
(its journal says whether the evaluator passed the candidate and whether the run profiled it);
RUN_RECORD the calls the run's evaluator and profiled wrapper recorded (kernel_call.py's
record_call, one JSON line per call: side, candidate, source_sha256, arguments); PROFILE_JSON
what `kactors profile --json` printed; PROFILE_RECORD the calls its wrapper recorded.
"""

import hashlib
import json
import sys
from pathlib import Path

# What the verified call must have bound for the test to exercise issue 12's fix: the input,
# the model's weight by position (a positional-only parameter) and its eps by name.
EXPECTED_PARAMETERS = ["x", "weight", "eps"]
EXPECTED_EPS = "1e-05"
FEATURES = 128


def read_lines(path):
    """The JSON lines of a file; a missing file is none, a broken line is reported."""
    path = Path(path)
    if not path.is_file():
        return [], f"{path} does not exist"
    records = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            records.append(json.loads(line))
        except ValueError as error:
            return records, f"{path} line {number} is not JSON ({error})"
    return records, None


def short(value):
    """A described argument in a few words: `tensor Tensor torch.bfloat16 [8, 128, 32, 32]
    stride [...] cuda:0 requires_grad=False sha256 1a2b3c4d…`, `float 1e-05`."""
    if "tensor" in value:
        return (
            f"tensor {value['tensor']} {value['dtype']} {value['shape']} stride {value['stride']} "
            f"{value['device']} requires_grad={value['requires_grad']} "
            f"sha256 {value['sha256'][:16]}…"
        )
    if "repr" in value:
        return f"{value['type']} {value['repr']}"
    return json.dumps(value, sort_keys=True)


def differences(verified, profiled):
    """What differs between two calls' argument lists, each difference in words; [] if none."""
    verified_names = [bound["parameter"] for bound in verified]
    profiled_names = [bound["parameter"] for bound in profiled]
    if verified_names != profiled_names:
        return [
            f"the verified call bound ({', '.join(verified_names)}), the profiled call "
            f"({', '.join(profiled_names)})"
        ]
    found = []
    for then, now in zip(verified, profiled):
        a, b = then["value"], now["value"]
        if a == b:
            continue
        fields = sorted(set(a) | set(b))
        changed = [
            f"{field} {json.dumps(a.get(field))} verified, {json.dumps(b.get(field))} profiled"
            for field in fields
            if a.get(field) != b.get(field)
        ]
        found.append(f"parameter {then['parameter']}: " + "; ".join(changed))
    return found


def verdict_of(journal):
    """(passed, reason) of candidate 0's verification, or (None, why) when there is none."""
    for record in journal:
        if (
            record.get("type") == "step_finished"
            and record.get("candidate") == 0
            and record.get("step") == "verify"
        ):
            verdict = record.get("verdict") or {}
            if verdict.get("verdict") == "passed":
                return True, None
            return False, verdict.get("reason") or record.get("error") or json.dumps(record)
    return None, "the journal has no verification of candidate 0"


def profile_of(journal):
    """None when the run profiled candidate 0, else why not, from the journal."""
    if any(r.get("type") == "profile_recorded" and r.get("candidate") == 0 for r in journal):
        return None
    for record in journal:
        if record.get("type") == "step_finished" and record.get("step") == "profile":
            return f"its profile step ended with error {record.get('error')!r}"
    return "the journal has no profile of candidate 0"


def compare_side(label, wrapper_calls, verified, checks):
    if not wrapper_calls:
        checks.append(
            f"FAIL {label}: no profiled wrapper call was recorded (did the wrapper run? "
            "see logs/)"
        )
        return
    failed = False
    for number, call in enumerate(wrapper_calls, 1):
        found = differences(verified["arguments"], call["arguments"])
        if found:
            failed = True
            checks.append(
                f"FAIL {label}: wrapper process {number} of {len(wrapper_calls)} measured a call "
                f"unlike the verified one: {' | '.join(found)}"
            )
    if not failed:
        words = ", ".join(
            f"{bound['parameter']} = {short(bound['value'])}" for bound in verified["arguments"]
        )
        checks.append(
            f"PASS {label}: all {len(wrapper_calls)} profiled wrapper call(s) got the verified "
            f"call's arguments: {words}"
        )


def main(kernel, run_dir, run_record, profile_json, profile_record):
    checks = []
    source_sha256 = hashlib.sha256(Path(kernel).read_bytes()).hexdigest()

    journal, problem = read_lines(Path(run_dir) / "journal.jsonl")
    if problem:
        checks.append(f"FAIL the run's journal: {problem}")
    passed, reason = verdict_of(journal)
    if passed:
        checks.append("PASS the evaluator verified kernel_function(x, weight, /, eps)")
    else:
        checks.append(
            f"FAIL the evaluator did not pass kernel_function(x, weight, /, eps): {reason}"
        )

    run_calls, problem = read_lines(run_record)
    if problem:
        checks.append(f"FAIL the run's call record: {problem}")
    profile_calls, problem = read_lines(profile_record)
    if problem:
        checks.append(f"FAIL kactors profile's call record: {problem}")
    others = {c.get("source_sha256") for c in run_calls + profile_calls} - {source_sha256}
    if others:
        checks.append(
            f"FAIL calls of other sources were recorded ({', '.join(sorted(map(str, others)))}); "
            f"the candidate's is {source_sha256}"
        )
    mine = [c for c in run_calls if c.get("source_sha256") == source_sha256]
    verified_calls = [c for c in mine if c.get("side") == "evaluator"]
    run_wrapper_calls = [c for c in mine if c.get("side") == "profile_wrapper"]
    profile_wrapper_calls = [
        c
        for c in profile_calls
        if c.get("source_sha256") == source_sha256 and c.get("side") == "profile_wrapper"
    ]

    if not verified_calls:
        checks.append(
            "FAIL no verified call was recorded: the evaluator never bound the candidate "
            "(see the verdict above and logs/)"
        )
        return report(checks)
    verified = verified_calls[0]
    for number, other in enumerate(verified_calls[1:], 2):
        found = differences(verified["arguments"], other["arguments"])
        if found:
            checks.append(
                f"FAIL verified call {number} of {len(verified_calls)} differs from the first: "
                + " | ".join(found)
            )
    names = [bound["parameter"] for bound in verified["arguments"]]
    values = {bound["parameter"]: bound["value"] for bound in verified["arguments"]}
    weight, eps = values.get("weight", {}), values.get("eps", {})
    if (
        names == EXPECTED_PARAMETERS
        and weight.get("shape") == [FEATURES]
        and eps.get("repr") == EXPECTED_EPS
    ):
        checks.append(
            "PASS the verified call bound the model's weight by position and its eps "
            f"({EXPECTED_EPS}) by name"
        )
    else:
        checks.append(
            f"FAIL the verified call bound {', '.join(names)} (expected "
            f"{', '.join(EXPECTED_PARAMETERS)}): weight {short(weight) if weight else 'absent'}, "
            f"eps {short(eps) if eps else 'absent'} (expected a [{FEATURES}] tensor and "
            f"{EXPECTED_EPS})"
        )

    why_not = profile_of(journal)
    if why_not is None:
        checks.append("PASS the run profiled the candidate (profile_recorded)")
    else:
        checks.append(f"FAIL the run did not profile the candidate: {why_not}")
    compare_side("the run's profile", run_wrapper_calls, verified, checks)

    try:
        profile = json.loads(Path(profile_json).read_text())
        ok, error = profile.get("ok"), profile.get("error")
    except (OSError, ValueError) as failure:
        ok, error = False, f"{profile_json} unreadable: {failure}"
    if ok:
        checks.append("PASS kactors profile profiled the candidate (ok)")
    else:
        checks.append(f"FAIL kactors profile did not profile the candidate: {error}")
    compare_side("kactors profile", profile_wrapper_calls, verified, checks)
    return report(checks)


def report(checks):
    for line in checks:
        print(line)
    return 1 if any(line.startswith("FAIL") for line in checks) else 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
