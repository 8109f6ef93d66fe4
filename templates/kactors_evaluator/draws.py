"""How many input draws fit in the device's memory, planned from the first draw's sizes. Needs
no torch."""

from .protocol import InputsDoNotFit

# Room kept beside the estimated peak for the candidate's own buffers and the allocator's
# rounding: the larger of the two.
MEMORY_MARGIN_BYTES = 1 << 30
MEMORY_MARGIN_FRACTION = 0.05


def gib(count):
    return f"{count / (1 << 30):.1f} GiB"


def bytes_needed(draws, sizes):
    """The peak device memory of keeping `draws` input draws, estimated from the first one.

    `sizes`: inputs_bytes and outputs_bytes (one draw's inputs and reference outputs),
    first_draw_peak_bytes (the peak of drawing the first draw and computing its reference, a
    float32 transient before the cast included) and flush_bytes. Two moments peak: drawing the
    last draw while the others are kept, and timing, which holds a working copy of every draw's
    inputs, a fresh copy for each checked call and the candidate's outputs (verification holds
    less). A margin is added for the candidate's own buffers and the allocator's rounding.
    """
    per_draw = sizes["inputs_bytes"] + sizes["outputs_bytes"]
    drawing = (draws - 1) * per_draw + sizes["first_draw_peak_bytes"]
    timing = (
        draws * per_draw
        + (draws + 1) * sizes["inputs_bytes"]
        + (draws + 1) * sizes["outputs_bytes"]
        + sizes["flush_bytes"]
    )
    peak = max(drawing, timing)
    return peak + max(MEMORY_MARGIN_BYTES, int(peak * MEMORY_MARGIN_FRACTION))


def plan_draws(seeds, sizes, available_bytes, device_name):
    """(draws to keep, bytes needed for 1 .. seeds draws): all `seeds` when they fit, else as
    many as fit but never fewer than two (the check that the output changes with the inputs
    needs two), else InputsDoNotFit."""
    needed = [bytes_needed(n, sizes) for n in range(1, seeds + 1)]
    fitting = [n for n in range(1, seeds + 1) if needed[n - 1] <= available_bytes]
    keep = max(fitting, default=0)
    fewest = min(2, seeds)
    if keep < fewest:
        raise InputsDoNotFit(
            f"the problem's inputs do not fit on {device_name}: {gib(needed[fewest - 1])} "
            f"needed, {gib(available_bytes)} free"
        )
    return keep, needed


# ---------------------------------------------------------------------------------------------
# Snapshots of the evaluator's state and what changed between two (no torch needed)
