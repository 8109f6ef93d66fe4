"""What the scaling scripts read from a journal: record times and each device's busy spans."""

from datetime import datetime


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
