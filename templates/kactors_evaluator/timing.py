"""Timing: a kernel (a candidate, or PyTorch's own eager and compiled model) over the draws in
rotation, each sample its own call between two events on a flushed L2, every timed call on
content no earlier call had, the last call of each draw checked against a reference computed
for that content."""

import contextlib
import math
import os

import torch
import triton
import triton.language as tl

from .gpu import as_tensor_list
from .protocol import EvaluatorError, Rejection, rejected

# Elements per program of the content change.
CHANGE_BLOCK = 4096
# Calls after the timed ones on one draw's content as it was before (issue 18): a kernel that
# answers from a memo of what it saw is fast there and only there. Their median is reported
# as seen_content_ms, which kactors compares with the timed median; five, so that a memo
# that misses the first still answers most of them.
SEEN_CONTENT_CALLS = 5


@triton.jit(do_not_specialize=["key"])
def change_blocks(src_ptr, dst_ptr, n, key, BLOCK: tl.constexpr):
    # dst = src * (1 + j / 64) with j in -7..-1, 1..7 drawn per element from a hash of its
    # position and the call's key: every non-zero value changes (by 2 to 14 units of bf16's
    # last place and more), and two calls agree on one element one time in 14, so no
    # fingerprint of a few sampled elements recognizes content it has seen. One read and one
    # write of the inputs, like the copy that restores them.
    block = tl.program_id(0)
    offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = offsets < n
    x = tl.load(src_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
    h = (offsets + key) * 0x5851F42D4C957F2D
    h = (h ^ (h >> 29)) * 0x2545F4914F6CDD1D
    h = h ^ (h >> 32)
    magnitude = ((h >> 8) & 0xFFFF) % 7 + 1
    sign = ((h >> 4) & 1) * 2 - 1
    factor = 1.0 + (sign * magnitude).to(tl.float32) * 0.015625
    tl.store(dst_ptr + offsets, (x * factor).to(dst_ptr.dtype.element_ty), mask=inside)


def change_content(pristine, out, key):
    """Writes into `out` (tensors like `pristine`'s) content that no call with another key saw
    (issue 18): each floating tensor's values changed by a few percent, in a pattern drawn from
    `key`; other tensors (indices, masks) copied as they are, since a changed index could be out
    of range. A memo that answers by content (a fingerprint of sampled elements, a ring of
    earlier results) never finds it."""
    for source, target in zip(pristine, out):
        if not isinstance(source, torch.Tensor):
            continue
        floating = source.is_floating_point()
        if floating and source.is_contiguous() and target.is_contiguous():
            n = source.numel()
            if n:
                change_blocks[(triton.cdiv(n, CHANGE_BLOCK),)](
                    source, target, n, key, BLOCK=CHANGE_BLOCK, num_warps=8
                )
        elif floating:
            magnitude, sign = key % 7 + 1, 1 - 2 * (key // 7 % 2)
            target.copy_(source * (1.0 + sign * magnitude / 64))
        else:
            target.copy_(source)


def percentile(sorted_values, fraction):
    position = (len(sorted_values) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def benchmark_counts(settings, request):
    warmup = request.get("warmup")
    repeat = request.get("repeat")
    warmup = settings.benchmark_warmup if warmup is None else warmup
    repeat = settings.benchmark_repeat if repeat is None else repeat
    for key, value, minimum in (("warmup", warmup, 0), ("repeat", repeat, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise EvaluatorError(f"{key} must be a whole number >= {minimum}, got {value!r}")
    return warmup, repeat


def benchmark(
    evaluator, fn, binding, warmup, repeat, restore_every_call, device_wide_end, candidate_kernels
):
    """Times fn over the draws in rotation.

    candidate_kernels: None for the PyTorch references; for a candidate, the names of the
    Triton kernels verify saw it launch (empty when this process did not verify it), one of
    which each call must launch.

    Each sample: the L2 flushed (a buffer of twice its size written), a start event, the
    call, an end event. The end of a sample must include all GPU work the call started on
    any stream. The candidate's Triton launches report their stream to the launch hook, and
    verify saw on which stream each of its PyTorch operations ran: when all of it went to
    the timing stream, an event recorded there right after the call ends exactly when the
    work does. Otherwise (or when verify did not see this candidate in this process) the
    end event is recorded only after torch.cuda.synchronize(), which waits for every stream
    of the device; that adds the host's synchronization latency (microseconds) to the sample
    but can never miss work. The host synchronizes after every sample either way, so no
    call overlaps the next one's flush or events.
    """
    draws = evaluator.draws
    working = [evaluator.fresh_inputs(d) for d in draws]
    # Each draw's own copy of the arguments after the inputs, (extra args, kwargs).
    bound = [binding.arguments([]) for _ in draws]
    total = warmup + repeat
    last_call_of_draw = {}
    for call in range(warmup, total):
        last_call_of_draw[call % len(draws)] = call
    checked_calls = set(last_call_of_draw.values())
    stream = torch.cuda.current_stream()
    timing_stream = stream.cuda_stream
    start = torch.cuda.Event(enable_timing=True)
    end_on_stream = torch.cuda.Event(enable_timing=True)
    end_after_sync = torch.cuda.Event(enable_timing=True)
    samples, launch_counts, seen_content = [], [], []
    is_candidate = candidate_kernels is not None
    probes = SEEN_CONTENT_CALLS if is_candidate else 0
    torch.cuda.synchronize()
    # Each timing its own keys: no candidate can have seen the content before it is timed.
    # (Always above 2**40: Triton passes it as one 64-bit type, compiled once.)
    salt = (1 << 40) | int.from_bytes(os.urandom(5), "little")
    for call in range(total + probes):
        index = call % len(draws) if call < total else 0
        checked = call in checked_calls
        expected = scales = None
        if warmup <= call < total:
            # Content no call had before; a checked call's also at a new address, so that a
            # result cached by input address cannot answer either, and judged against a
            # reference computed for it.
            args = working[index]
            if checked:
                args = [torch.empty_like(v) if isinstance(v, torch.Tensor) else v for v in args]
            change_content(draws[index].inputs, args, salt + call)
            if checked:
                expected, scales = evaluator.reference_of(args)
        else:
            args = working[index]
            if restore_every_call or call >= total:
                for mine, pristine in zip(args, draws[index].inputs):
                    if isinstance(mine, torch.Tensor):
                        mine.copy_(pristine)
        recorder = evaluator.recorder_class(timing_stream) if checked and is_candidate else None
        evaluator.l2_flush.zero_()
        with evaluator.launch_log.window() as log, torch.no_grad():
            start.record(stream)
            with recorder if recorder is not None else contextlib.nullcontext():
                result = fn(*args, *bound[index][0], **bound[index][1])
            end_on_stream.record(stream)
            torch.cuda.synchronize()
            end_after_sync.record(stream)
            end_after_sync.synchronize()
        off_stream = any(s != timing_stream for s in log.streams)
        end = end_after_sync if device_wide_end or off_stream else end_on_stream
        elapsed_ms = start.elapsed_time(end)
        if call >= total:
            which = f"call {call - total} on content seen before"
        elif call >= warmup:
            which = f"timed call {call - warmup}"
        else:
            which = f"warm-up call {call}"
        which = f"{which}, draw {index}"
        if is_candidate:
            if not log.names:
                return rejected(
                    f"{which} launched no Triton kernel: its result came from somewhere else"
                )
            if candidate_kernels and not set(log.names) & set(candidate_kernels):
                return rejected(
                    f"{which} launched {sorted(set(log.names))}, none of the kernels verified "
                    f"({', '.join(candidate_kernels)})"
                )
        if call >= total:
            seen_content.append(elapsed_ms)
        elif call >= warmup:
            samples.append(elapsed_ms)
            launch_counts.append(len(log.names))
        if checked:
            try:
                if recorder is not None:
                    evaluator.rules.check_own_work(log.names, recorder.ops, which)
                if is_candidate:
                    outputs = evaluator.rules.output_tensors(result, args)
                else:
                    outputs = as_tensor_list(result, "Model.forward")
                evaluator.rules.check_outputs(outputs, expected, scales, which, {})
            except Rejection as rejection:
                return rejected(str(rejection), rejection.plain)
        del result, args
    ordered = sorted(samples)
    return {
        "passed": True,
        "reason": None,
        "median_ms": percentile(ordered, 0.5),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "p25_ms": percentile(ordered, 0.25),
        "p75_ms": percentile(ordered, 0.75),
        "samples": len(samples),
        "launches_per_call": min(launch_counts),
        "seen_content_ms": percentile(sorted(seen_content), 0.5) if seen_content else None,
    }
