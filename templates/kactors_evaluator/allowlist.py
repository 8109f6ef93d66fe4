"""The aten allowlist, data/aten_allowlist.yaml: which PyTorch operations a candidate's
kernel_function may run besides its Triton kernels. Needs no torch: `evaluator.py
--classify-ops` answers from it in CI."""

from pathlib import Path

from .protocol import EvaluatorError


def load_allowlist(path):
    """Reads data/aten_allowlist.yaml: {"aten.<op>": reason}.

    The file is a small, fixed subset of YAML (a top-level `allowed:` list of `op:`/`why:`
    pairs, plain scalars), read here without PyYAML, which torch does not install. Anything
    outside that subset is an error naming the line, so the file stays valid YAML for kactors.
    """
    text = Path(path).read_text(encoding="utf-8")
    allowed = {}
    in_list = False
    current = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{path}:{number}"
        if raw == "allowed:":
            in_list = True
            continue
        if not in_list:
            raise EvaluatorError(f"{where}: expected the top-level key `allowed:`, got {raw!r}")
        if raw.startswith("  - op: "):
            if current is not None and current not in allowed:
                raise EvaluatorError(f"{where}: op {current!r} has no `why:` line")
            current = _plain_scalar(raw[len("  - op: ") :], where)
            if "." not in current:
                current = "aten." + current
            if current in allowed:
                raise EvaluatorError(f"{where}: op {current!r} is listed twice")
            continue
        if raw.startswith("    why: ") and current is not None and current not in allowed:
            allowed[current] = _plain_scalar(raw[len("    why: ") :], where)
            continue
        raise EvaluatorError(
            f"{where}: expected `  - op: NAME` or `    why: REASON` under `allowed:`, got {raw!r}"
        )
    if current is not None and current not in allowed:
        raise EvaluatorError(f"{path}: op {current!r} has no `why:` line")
    if not allowed:
        raise EvaluatorError(f"{path}: no operations under `allowed:`")
    return allowed


def _plain_scalar(value, where):
    value = value.strip()
    if not value or ": " in value or " #" in value or value[0] in "\"'&*!|>%@`[]{},#?-":
        raise EvaluatorError(f"{where}: {value!r} is not a plain YAML scalar")
    return value


def op_key(op_name):
    """`aten.empty_like.default` -> `aten.empty_like`: the allowlist names overload packets."""
    parts = op_name.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op_name


def disallowed_ops(op_names, allowlist):
    """The recorded operations the allowlist does not accept, first occurrence order."""
    rejected = []
    for name in op_names:
        if op_key(name) not in allowlist and name not in rejected:
            rejected.append(name)
    return rejected


# ---------------------------------------------------------------------------------------------
# Start-up configuration
