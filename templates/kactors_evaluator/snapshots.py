"""Snapshots of the evaluator's state, and what changed between two, as sentences (the audit's
pure half). Needs no torch."""

import types


def identity_key(value):
    """What a snapshot keeps of a value: plain numbers by value, anything else by identity, and
    for a function also its code, defaults and closure, which can be replaced in place."""
    if value is None or isinstance(value, (bool, int, float, complex)):
        return ("value", repr(value))
    function = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
    if isinstance(function, types.FunctionType):
        return (
            id(value),
            id(function.__code__),
            id(function.__defaults__),
            id(function.__kwdefaults__),
            tuple(cell_identity(cell) for cell in function.__closure__ or ()),
        )
    if isinstance(value, property):
        return (id(value), id(value.fget), id(value.fset), id(value.fdel))
    return (id(value),)


def cell_identity(cell):
    try:
        return id(cell.cell_contents)
    except ValueError:
        return None


def namespace_keys(namespace, callables_only):
    """{name: identity_key} over a module's or a class's own attributes."""
    keys = {}
    for name, value in list(vars(namespace).items()):
        if callables_only and not callable(value):
            continue
        keys[name] = identity_key(value)
    return keys


def state_changes(before, after, limit=8):
    """What changed from one snapshot to the next, as sentences (at most `limit`, then a count).

    A snapshot maps a section's label to (additions_count, {name: key}); the label prefixes the
    names ("torch." + "allclose"). A name that vanished or whose key differs is a change, and in
    sections where additions count (a class's attributes, where an addition shadows an inherited
    method; the evaluator's own globals, where one shadows a builtin) so is a new name. The
    section "setting " holds values and says how they changed.
    """
    changes = []
    for label in sorted(before):
        additions_count, old = before[label]
        new = after.get(label, (additions_count, {}))[1]
        for name in sorted(old):
            if name not in new:
                changes.append(f"{label}{name} was removed")
            elif new[name] != old[name]:
                if label == "setting ":
                    changes.append(f"{label}{name} changed from {old[name]} to {new[name]}")
                else:
                    changes.append(f"{label}{name} was replaced")
        if additions_count:
            changes.extend(f"{label}{name} was added" for name in sorted(set(new) - set(old)))
    if len(changes) > limit:
        changes = changes[:limit] + [f"and {len(changes) - limit} more changes"]
    return changes


# ---------------------------------------------------------------------------------------------
# GPU helpers
