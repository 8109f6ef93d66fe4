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

How a candidate's module is loaded, its Triton launches seen, the problem's model and inputs
drawn and kernel_function's parameters bound is kernel_call.py's, beside this file, which the
profiled wrapper imports too: a candidate is profiled with the arguments it was verified with.

`evaluator.py --classify-ops --allowlist FILE OP...` prints which aten operation names the
allowlist accepts, without importing torch: the allowlist logic is tested in CI that way.

Two environment variables exist for tests on a GPU only, never set by kactors:
KACTORS_EVALUATOR_MEMORY_CAP_GIB=G caps the child's device memory at G GiB with
torch.cuda.set_per_process_memory_fraction, to see how a smaller GPU fares, and
KACTORS_EVALUATOR_INTEGRITY=off switches the audit off, to measure what it costs.
"""

import argparse
import contextlib
import ctypes
import gc
import json
import math
import os
import platform
import re
import resource
import select
import signal
import socket
import sys
import threading
import time
import traceback
import types
from pathlib import Path

# kernel_call.py lies beside this file (a run's tools/, or templates/), which is on sys.path when
# this file runs as a script but not when it is imported (the stand-in and the tests do). No
# __pycache__ is written anywhere: not into the user's kernel directory, not beside this file.
sys.dont_write_bytecode = True
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_call  # noqa: E402

try:
    import triton
    import triton.language as tl
except ImportError:
    # The --classify-ops mode needs neither, and CI runs it without them.
    triton = tl = None
# Imported by import_gpu_stack(): it takes seconds, which --classify-ops need not spend.
torch = None

DTYPE_ALIASES = kernel_call.DTYPE_ALIASES
# atol = rtol by dtype, as KernelAgent's test.py uses for bf16.
DEFAULT_TOLERANCE = {"bfloat16": 1e-2, "float16": 1e-2, "float32": 1e-4}
MIN_L2_FLUSH_BYTES = 256 << 20
# Elements per program of the comparison kernel.
COMPARE_BLOCK = 4096
# Words (of 4 bytes where the tensor allows) per program of the checksum kernel.
CHECKSUM_BLOCK = 8192
# Every tampering verdict's reason starts with these words; kactors' report counts them.
TAMPERED = "tampered with the evaluator's state"
# Test-only switches (see the module's docstring); kactors never sets them.
MEMORY_CAP_VARIABLE = "KACTORS_EVALUATOR_MEMORY_CAP_GIB"
INTEGRITY_VARIABLE = "KACTORS_EVALUATOR_INTEGRITY"
# Room kept beside the estimated peak for the candidate's own buffers and the allocator's
# rounding: the larger of the two.
MEMORY_MARGIN_BYTES = 1 << 30
MEMORY_MARGIN_FRACTION = 0.05
# The longest line the zygote takes from a child (a reply with a long traceback fits): a child
# that writes more is broken, and is replaced.
MAX_CHILD_LINE = 64 << 20
CONFIG_KEYS = {
    "dtype",
    "atol",
    "rtol",
    "seeds",
    "benchmark_warmup",
    "benchmark_repeat",
    "allowlist",
    "l2_flush_bytes",
}
# Inductor names the Triton kernels it generates triton_<kind>_...: a candidate that hands its
# work to torch.compile launches Triton kernels without having written any.
INDUCTOR_KERNEL_NAME = re.compile(r"^triton_(poi|red|per|tem|for|unk|spl)_")
# Messages of errors after which the CUDA/HIP context is unusable (sticky errors).
POISONED_CONTEXT = re.compile(
    r"illegal memory access|illegal instruction|misaligned address|unspecified launch failure"
    r"|device-side assert|CUDA error|cudaError|CUDA_ERROR|HIP error|hipError"
    r"|Triton Error \[(CUDA|HIP)\]"
)


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
# The aten allowlist (no torch needed)


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
        self.seeds = _whole(raw, "seeds", 3, minimum=1)
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


def import_gpu_stack():
    global torch
    import torch as torch_module

    if triton is None:
        raise EvaluatorError("triton is not importable by this Python interpreter")
    torch = torch_module


if triton is not None:

    @triton.jit
    def compare_blocks(
        a_ptr, e_ptr, abs_ptr, rel_ptr, bad_ptr, nonfinite_ptr, n, atol, rtol, BLOCK: tl.constexpr
    ):
        # Per block: max |a - e|, max |a - e| / |e| where e != 0 (both over finite differences),
        # the elements out of tolerance and the non-finite elements of a. One read of each side:
        # a 3.5 GiB output is compared in about 2 ms, where float32 torch operations took 70 ms.
        block = tl.program_id(0)
        offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        a = tl.load(a_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
        e = tl.load(e_ptr + offsets, mask=inside, other=0.0).to(tl.float32)
        diff = tl.abs(a - e)
        # Finite means an exponent that is not all ones; bit tests survive any float rewriting.
        a_finite = (a.to(tl.int32, bitcast=True) & 0x7F800000) != 0x7F800000
        diff_finite = (diff.to(tl.int32, bitcast=True) & 0x7F800000) != 0x7F800000
        # A NaN difference compares false: out of tolerance, as in torch.allclose.
        good = (diff <= atol + rtol * tl.abs(e)) & a_finite
        usable = inside & diff_finite
        rel_usable = usable & (e != 0.0)
        rel = diff / tl.where(rel_usable, tl.abs(e), 1.0)
        tl.store(abs_ptr + block, tl.max(tl.where(usable, diff, 0.0), axis=0))
        tl.store(rel_ptr + block, tl.max(tl.where(rel_usable, rel, 0.0), axis=0))
        tl.store(bad_ptr + block, tl.sum(tl.where(inside & (good == 0), 1, 0), axis=0))
        tl.store(nonfinite_ptr + block, tl.sum(tl.where(inside & (a_finite == 0), 1, 0), axis=0))

    @triton.jit
    def checksum_blocks(words_ptr, sums_ptr, n, BLOCK: tl.constexpr):
        # Per block: the int64 sum of each word mixed with its position, so that zeroing,
        # swapping or shifting words changes the sum, not only changing their total.
        block = tl.program_id(0)
        offsets = block.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        words = tl.load(words_ptr + offsets, mask=inside, other=0).to(tl.int64)
        mixed = (words + 1 + offsets * 0x2545F4914F6CDD1D) * 0x5851F42D4C957F2D
        mixed = mixed ^ (mixed >> 31)
        tl.store(sums_ptr + block, tl.sum(tl.where(inside, mixed, 0), axis=0))


def checksum_words(tensor):
    """A tensor's bytes as one flat run of words (int32 where its size and offset allow)."""
    flat = tensor.detach()
    if flat.device.type != "cuda":
        flat = flat.to("cuda")
    flat = flat.contiguous().reshape(-1)
    for dtype in (torch.int32, torch.int16, torch.uint8):
        try:
            return flat.view(dtype)
        except RuntimeError:
            continue
    raise EvaluatorError(f"cannot read a {tensor.dtype} tensor as words for its checksum")


def checksums_of(tensors):
    """One 64-bit checksum per tensor, as 16 hex digits, from the checksum kernel: one pass over
    each tensor's bytes (about 4 TB/s on an H200), then one host synchronization for all."""
    parts = []
    for tensor in tensors:
        words = checksum_words(tensor)
        blocks = triton.cdiv(words.numel(), CHECKSUM_BLOCK)
        sums = torch.zeros(max(blocks, 1), dtype=torch.int64, device=words.device)
        if blocks:
            checksum_blocks[(blocks,)](
                words, sums, words.numel(), BLOCK=CHECKSUM_BLOCK, num_warps=8
            )
        parts.append(sums.sum())
    if not parts:
        return []
    return [format(value & 0xFFFFFFFFFFFFFFFF, "016x") for value in torch.stack(parts).tolist()]


def aten_recorder_class():
    from torch.utils._python_dispatch import TorchDispatchMode

    class AtenRecorder(TorchDispatchMode):
        """Records every aten operation of a call, and whether one ran off the timing stream."""

        def __init__(self, timing_stream):
            super().__init__()
            self.ops = []
            self.timing_stream = timing_stream
            self.off_stream = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            if torch.cuda.current_stream().cuda_stream != self.timing_stream:
                self.off_stream = True
            return func(*args, **(kwargs or {}))

    return AtenRecorder


def set_triton_cache_dir(path):
    path.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(path)
    cache_knobs = getattr(getattr(triton, "knobs", None), "cache", None)
    if cache_knobs is not None and hasattr(cache_knobs, "dir"):
        cache_knobs.dir = str(path)


def is_poisoned_context_error(error):
    accelerator_error = getattr(torch, "AcceleratorError", None) if torch else None
    if accelerator_error is not None and isinstance(error, accelerator_error):
        return True
    return bool(POISONED_CONTEXT.search(f"{type(error).__name__}: {error}"))


def context_is_usable():
    try:
        probe = torch.ones(1, device="cuda")
        probe.add_(1)
        torch.cuda.synchronize()
        return probe.item() == 2.0
    except Exception:
        return False


def clone_values(values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def as_tensor_list(value, what):
    if isinstance(value, torch.Tensor):
        return [value]
    if (
        isinstance(value, (tuple, list))
        and value
        and all(isinstance(v, torch.Tensor) for v in value)
    ):
        return list(value)
    raise Rejection(
        f"{what} returned {type(value).__name__}, expected a tensor or a tuple of tensors"
    )


def storage_of(tensor):
    return tensor.untyped_storage().data_ptr()


def poison(tensor):
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))


def tensor_bytes(value):
    return value.numel() * value.element_size() if isinstance(value, torch.Tensor) else 0


def cap_memory(cap_gib, total_bytes):
    """Caps this process's device memory at `cap_gib` GiB (a test of smaller GPUs); the cap in
    bytes."""
    try:
        cap = int(float(cap_gib) * (1 << 30))
    except ValueError:
        cap = 0
    if not 0 < cap <= total_bytes:
        raise EvaluatorError(
            f"{MEMORY_CAP_VARIABLE}={cap_gib!r} must be a number of GiB above 0 and at most the "
            f"device's {gib(total_bytes)}"
        )
    torch.cuda.set_per_process_memory_fraction(cap / total_bytes, 0)
    return cap


def available_memory(cap):
    """Bytes this process could still allocate on the device: its free memory, within the cap."""
    free, _ = torch.cuda.mem_get_info()
    if cap is not None:
        free = min(free, cap - torch.cuda.memory_reserved())
    return max(free, 0)


def checksum(tensors):
    """One float64 sum per tensor: equal outputs give equal sums (reductions are deterministic)."""
    return tuple(torch.sum(t, dtype=torch.float64).item() for t in tensors)


def compare(actual, expected, atol, rtol):
    """(max abs err, max rel err, elements out of tolerance, non-finite elements of actual).

    The tolerance is torch.allclose's, |actual - expected| <= atol + rtol * |expected|, in
    float32. A NaN or Inf in actual is always out of tolerance. The relative error is taken
    where expected is non-zero; both maxima leave out non-finite differences.
    """
    a = actual.detach().contiguous().view(-1)
    e = expected.detach().contiguous().view(-1)
    n = a.numel()
    if n == 0:
        return 0.0, 0.0, 0, 0
    blocks = triton.cdiv(n, COMPARE_BLOCK)
    max_abs = torch.empty(blocks, dtype=torch.float32, device=a.device)
    max_rel = torch.empty(blocks, dtype=torch.float32, device=a.device)
    bad = torch.empty(blocks, dtype=torch.int32, device=a.device)
    nonfinite = torch.empty(blocks, dtype=torch.int32, device=a.device)
    # No fused multiply-add: atol + rtol * |e| rounds as torch.allclose's separate operations
    # do, so an element exactly at the tolerance gets the same verdict.
    compare_blocks[(blocks,)](
        a,
        e,
        max_abs,
        max_rel,
        bad,
        nonfinite,
        n,
        atol,
        rtol,
        BLOCK=COMPARE_BLOCK,
        num_warps=8,
        enable_fp_fusion=False,
    )
    values = torch.stack(
        [
            max_abs.amax().double(),
            max_rel.amax().double(),
            bad.sum().double(),
            nonfinite.sum().double(),
        ]
    ).tolist()
    return values[0], values[1], int(values[2]), int(values[3])


def percentile(sorted_values, fraction):
    position = (len(sorted_values) - 1) * fraction
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def finite_or_none(value):
    return value if value is not None and math.isfinite(value) else None


def pci_bus_id(props, uuid):
    domain = getattr(props, "pci_domain_id", None)
    bus = getattr(props, "pci_bus_id", None)
    device = getattr(props, "pci_device_id", None)
    if isinstance(domain, int) and isinstance(bus, int) and isinstance(device, int):
        # nvidia-smi's form: 00000000:19:00.0
        return f"{domain:08X}:{bus:02X}:{device:02X}.0"
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
        bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
        return bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)
    except Exception:
        return None


def driver_version():
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    for path, pattern in (
        ("/proc/driver/nvidia/version", r"Kernel Module\s+([0-9][0-9.]*)"),
        ("/sys/module/amdgpu/version", r"([0-9][0-9A-Za-z.\-]*)"),
    ):
        try:
            match = re.search(pattern, Path(path).read_text())
        except OSError:
            continue
        if match:
            return match.group(1)
    return None


def describe_device():
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    uuid = str(uuid) if uuid is not None else None
    if uuid and torch.version.hip is None and not uuid.startswith(("GPU-", "MIG-")):
        uuid = "GPU-" + uuid
    device = {
        "name": props.name,
        "uuid": uuid,
        "pci_bus_id": pci_bus_id(props, uuid),
        "index": index,
    }
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "driver": driver_version(),
    }
    return device, versions, props


def unjudged_verdict():
    """A verify reply's verdict fields before anything is known."""
    return {
        "passed": False,
        "max_abs_err": None,
        "max_rel_err": None,
        "reason": None,
        "launched": [],
        "aten_ops": [],
        "compile_s": None,
        "run_s": None,
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


def kernel_keys(function):
    """What identifies one of the evaluator's own Triton kernels: the JITFunction's attributes,
    its pre-run hooks and each compiled variant (replaceable in its cache)."""
    keys = {name: identity_key(value) for name, value in list(vars(function).items())}
    keys["pre_run_hooks"] = ("value", repr([id(hook) for hook in function.pre_run_hooks]))
    for device, caches in list(function.device_caches.items()):
        for key, kernel in list(caches[0].items()):
            own = vars(kernel)
            keys[f"compiled variant {device}/{hash(key)}"] = (
                id(kernel),
                repr(own.get("function")),
                id(own.get("run", own.get("_run"))),
            )
    return keys


# ---------------------------------------------------------------------------------------------
# What a candidate could change behind the evaluator's back


# Modules whose functions a verification or the protocol depends on: a function of theirs that
# a candidate replaced (or removed) is tampering. Names added to a module are not (torch adds
# some lazily).
WATCHED_MODULES = (
    "builtins",
    "torch",
    "torch._C",
    "torch.nn.functional",
    "torch.cuda",
    "torch.backends.cuda",
    "torch.backends.cudnn",
    "torch.utils._python_dispatch",
    "triton",
    "triton.language",
    "triton.runtime.jit",
    "triton.runtime.autotuner",
    "triton.compiler.compiler",
    "contextlib",
    "ctypes",
    "gc",
    "importlib.util",
    "inspect",
    "json",
    "json.encoder",
    "linecache",
    "math",
    "os",
    "re",
    "signal",
    "socket",
    "sys",
    "threading",
    "time",
    "traceback",
    "types",
)
# Classes whose attributes a verification depends on; here an added attribute counts too, since
# it shadows an inherited one (torch.Tensor.clone added over TensorBase's).
WATCHED_CLASSES = (
    ("torch", "Tensor"),
    ("torch._C", "TensorBase"),
    ("torch.nn", "Module"),
    ("torch.cuda", "Event"),
    ("torch.cuda", "Stream"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
    ("triton.runtime.jit", "JITFunction"),
    ("triton.runtime.jit", "KernelInterface"),
    ("triton.runtime.autotuner", "Autotuner"),
    ("triton.compiler.compiler", "CompiledKernel"),
    ("json", "JSONEncoder"),
)


def watched_namespaces(recorder_class):
    """(label, namespace, callables only, additions count) for every module and class that the
    audit watches, resolved once, in the zygote: a candidate that swaps a module in sys.modules
    is seen by the sys.modules section, not followed."""
    namespaces = []
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            namespaces.append((f"{name}.", module, True, False))
    for module_name, class_name in WATCHED_CLASSES:
        cls = getattr(sys.modules.get(module_name), class_name, None)
        if isinstance(cls, type):
            namespaces.append((f"{module_name}.{class_name}.", cls, False, True))
    namespaces.append(("AtenRecorder.", recorder_class, False, True))
    # This module, and kernel_call, which loads, binds and launches every candidate: every
    # attribute of theirs and of their classes.
    for label, module in (("evaluator", sys.modules[__name__]), ("kernel_call", kernel_call)):
        namespaces.append((f"{label}.", module, False, True))
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == module.__name__:
                namespaces.append((f"{label}.{name}.", value, False, True))
    return namespaces


def settings_snapshot():
    """The process-wide settings a reference or a timing depends on, each as its repr."""
    values = {}

    def put(name, read):
        try:
            values[name] = repr(read())
        except Exception as error:
            values[name] = f"<unreadable: {type(error).__name__}>"

    matmul = torch.backends.cuda.matmul
    for flag in (
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
    ):
        put(f"torch.backends.cuda.matmul.{flag}", lambda flag=flag: getattr(matmul, flag))
    for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        put(f"torch.backends.cudnn.{flag}", lambda flag=flag: getattr(torch.backends.cudnn, flag))
    put("torch.get_float32_matmul_precision()", torch.get_float32_matmul_precision)
    put("torch.are_deterministic_algorithms_enabled()", torch.are_deterministic_algorithms_enabled)
    put(
        "torch.is_deterministic_algorithms_warn_only_enabled()",
        torch.is_deterministic_algorithms_warn_only_enabled,
    )
    put("torch.get_default_dtype()", torch.get_default_dtype)
    if hasattr(torch, "get_default_device"):
        put("torch.get_default_device()", torch.get_default_device)
    # torch.set_default_device and any mode a candidate entered and left open sit on these.
    put("the torch function mode stack's depth", torch._C._len_torch_function_stack)
    put("the torch dispatch mode stack's depth", torch._C._len_torch_dispatch_stack)
    put("torch.is_grad_enabled()", torch.is_grad_enabled)
    put("torch.is_inference_mode_enabled()", torch.is_inference_mode_enabled)
    put("torch.get_num_threads()", torch.get_num_threads)
    put("torch.cuda.current_device()", torch.cuda.current_device)
    put("torch.cuda.current_stream()", lambda: torch.cuda.current_stream().cuda_stream)
    put("torch.cuda.is_current_stream_capturing()", torch.cuda.is_current_stream_capturing)
    if hasattr(torch.cuda, "get_per_process_memory_fraction"):
        put(
            "torch.cuda.get_per_process_memory_fraction()",
            torch.cuda.get_per_process_memory_fraction,
        )
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    for hook in (
        "launch_enter_hook",
        "launch_exit_hook",
        "kernel_load_start_hook",
        "kernel_load_end_hook",
    ):
        chain = getattr(runtime, hook, None)
        put(
            f"triton.knobs.runtime.{hook}",
            lambda chain=chain: (id(chain), [id(call) for call in getattr(chain, "calls", ())]),
        )
    for hook in ("jit_cache_hook", "jit_post_compile_hook", "add_stages_inspection_hook"):
        put(f"triton.knobs.runtime.{hook}", lambda hook=hook: id(getattr(runtime, hook, None)))
    for group_name in dir(getattr(triton, "knobs", None)):
        group = getattr(triton.knobs, group_name, None)
        if type(group).__name__.endswith("_knobs"):
            # Only what was set explicitly: reading a knob may run a tool (ptxas --version).
            put(f"triton.knobs.{group_name}", lambda group=group: sorted(vars(group).items()))
    put("sys.gettrace()", sys.gettrace)
    put("sys.getprofile()", sys.getprofile)
    if hasattr(threading, "gettrace"):
        put("threading.gettrace()", threading.gettrace)
        put("threading.getprofile()", threading.getprofile)
    for hook in ("excepthook", "unraisablehook", "displayhook"):
        put(f"sys.{hook}", lambda hook=hook: getattr(sys, hook))
    put("threading.excepthook", lambda: threading.excepthook)
    put("sys.getswitchinterval()", sys.getswitchinterval)
    put("sys.getrecursionlimit()", sys.getrecursionlimit)
    put("sys.meta_path", lambda: [id(finder) for finder in sys.meta_path])
    put("sys.path_hooks", lambda: [id(hook) for hook in sys.path_hooks])
    put("gc.isenabled()", gc.isenabled)
    put("gc.get_threshold()", gc.get_threshold)
    put("gc.callbacks", lambda: [id(callback) for callback in gc.callbacks])
    for number in sorted(signal.valid_signals()):
        if number in (signal.SIGKILL, signal.SIGSTOP):
            continue
        put(f"the handler of signal {number}", lambda number=number: signal.getsignal(number))
    for timer in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
        put(
            f"signal.getitimer({timer})",
            lambda timer=timer: signal.getitimer(getattr(signal, timer)),
        )
    for limit in ("AS", "DATA", "NOFILE", "CPU", "FSIZE", "NPROC", "STACK", "CORE", "MEMLOCK"):
        if hasattr(resource, f"RLIMIT_{limit}"):
            put(
                f"resource limit RLIMIT_{limit}",
                lambda limit=limit: resource.getrlimit(getattr(resource, f"RLIMIT_{limit}")),
            )
    put("the CPU affinity", lambda: sorted(os.sched_getaffinity(0)))
    put("the scheduling priority", lambda: os.getpriority(os.PRIO_PROCESS, 0))
    return values


def torch_owned(thread):
    """Whether a Python thread runs torch's own code (torch.compile's worker pool keeps threads
    that come and go after a reference was timed)."""
    target = getattr(thread, "_target", None) or getattr(thread, "function", None)
    return getattr(target, "__module__", None) is not None and (
        target.__module__ == "torch" or target.__module__.startswith("torch.")
    )


def task_names():
    """{thread id: name} of this process's threads, as the kernel lists them."""
    names = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm", encoding="utf-8", errors="replace") as comm:
                names[task] = comm.read().strip()
        except OSError:
            continue
    return names


# ---------------------------------------------------------------------------------------------
# The evaluator


class Draw:
    """One input draw: pristine inputs (never handed to a candidate) and its reference output."""

    def __init__(self, seed, inputs, expected):
        self.seed = seed
        self.inputs = inputs
        self.expected = expected
        self.expected_sums = checksum(expected)


class Candidate:
    def __init__(self, path, module, function, binding):
        self.path = path
        self.module = module
        self.function = function
        # kernel_call.Binding: the arguments after the inputs, from the model's attributes.
        self.binding = binding
        # None until a verify request of this process has judged it.
        self.passed = None
        self.kernel_names = []
        # Unknown until verified: time such a candidate the careful way.
        self.mutates_inputs = True
        self.side_streams = True


class Evaluator:
    # Attributes of the evaluator that change from request to request by its own hand; the
    # audit leaves them out of its snapshot of the evaluator's state.
    VOLATILE = frozenset(
        {
            "candidate",
            "candidates_loaded",
            "compiled_model",
            "state_before",
            "ran_candidate_code",
            "memory_baseline",
            "reserved_baseline",
        }
    )

    def __init__(self, kernel_dir, settings):
        self.kernel_dir = kernel_dir
        self.settings = settings
        self.allowlist = load_allowlist(settings.allowlist_path)
        self.launch_log = kernel_call.LaunchLog()
        self.recorder_class = None
        self.candidate = None
        self.candidates_loaded = 0
        self.compiled_model = None
        self.integrity = os.environ.get(INTEGRITY_VARIABLE, "on") != "off"
        self.state_before = None
        self.ran_candidate_code = False

    def prepare(self):
        """In the zygote: what every child needs and no CUDA context does. The first use of a
        dispatch mode took 5 s on the H200 (lazy imports inside torch): a tiny CPU operation
        under one here pays that once for all children. (Not under the recorder, which asks
        CUDA for the current stream; and too small for CPU threads to start, which would not
        survive a fork.)"""
        import_gpu_stack()
        kernel_call.install_launch_hook(triton, self.launch_log)
        self.recorder_class = aten_recorder_class()
        from torch.utils._python_dispatch import TorchDispatchMode

        class FirstUse(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                str(func)
                return func(*args, **(kwargs or {}))

        with torch.no_grad(), FirstUse():
            probe = torch.ones(8)
            torch.empty_like(probe).copy_(probe)
        self.namespaces = watched_namespaces(self.recorder_class)

    def fork_hazard(self):
        """Why a child forked now could not use CUDA, or None."""
        if torch is not None and torch.cuda.is_initialized():
            return "the zygote made a CUDA context: a forked child could not use the device"
        return None

    def start(self):
        started = time.perf_counter()
        torch.cuda.set_device(0)
        device, versions, props = describe_device()
        cap_gib = os.environ.get(MEMORY_CAP_VARIABLE)
        self.memory_cap = None if cap_gib is None else cap_memory(cap_gib, props.total_memory)
        sys.path.append(str(self.kernel_dir))
        problem = kernel_call.load_module(self.kernel_dir / "problem.py", "kactors_problem")
        try:
            # The --config dtype wins, then problem.DTYPE, then bf16.
            self.dtype = kernel_call.resolve_dtype(torch, self.settings.dtype, problem)
        except kernel_call.CallError as error:
            raise EvaluatorError(str(error)) from None
        tolerance = DEFAULT_TOLERANCE[str(self.dtype).replace("torch.", "")]
        self.atol = self.settings.atol if self.settings.atol is not None else tolerance
        self.rtol = self.settings.rtol if self.settings.rtol is not None else tolerance
        l2_bytes = getattr(props, "L2_cache_size", 0) or 0
        flush_bytes = self.settings.l2_flush_bytes or max(2 * l2_bytes, MIN_L2_FLUSH_BYTES)
        memory = self.draw_inputs(problem, flush_bytes, props)
        self.l2_flush = torch.zeros(flush_bytes, dtype=torch.uint8, device="cuda")
        self.warm_up_own_paths()
        ready = {
            "type": "ready",
            "device": device,
            "versions": versions,
            "dtype": str(self.dtype).replace("torch.", ""),
            "draws": len(self.draws),
            "seeds": self.settings.seeds,
            "memory": memory,
            "atol": self.atol,
            "rtol": self.rtol,
            "l2_flush_bytes": flush_bytes,
        }
        if self.integrity:
            named = list(self.kept_tensors())
            self.tensor_names = [name for name, _ in named]
            self.expected_checksums = checksums_of([tensor for _, tensor in named])
            ready["integrity"] = {
                "tensors": self.tensor_names,
                "checksums": self.expected_checksums,
            }
        self.reset_memory_baseline()
        ready["setup_s"] = round(time.perf_counter() - started, 4)
        return ready

    def draw_inputs(self, problem, flush_bytes, props):
        """Builds the model and the draws: all `seeds` when they fit in the device's memory,
        else as many as fit but at least two, judged from the first draw's size and peak."""
        seeds = list(range(self.settings.seeds))
        device_name = props.name
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        # torch.device("cuda") as a context only around the problem's own code: set globally
        # it would add a Python function-mode hop to every torch call of every timed run.
        with torch.device("cuda"):
            self.model = kernel_call.build_model(torch, problem, self.dtype, seeds[0])
            self.draws = []
            try:
                self.draws.append(self.make_draw(problem, seeds[0]))
            except torch.OutOfMemoryError as error:
                raise InputsDoNotFit(
                    f"the problem's inputs do not fit on {device_name}: more than "
                    f"{gib(torch.cuda.max_memory_allocated() - before)} needed for one draw, "
                    f"{gib(available_memory(self.memory_cap))} free"
                ) from error
            first = self.draws[0]
            sizes = {
                "inputs_bytes": sum(tensor_bytes(v) for v in first.inputs),
                "outputs_bytes": sum(tensor_bytes(t) for t in first.expected),
                "first_draw_peak_bytes": torch.cuda.max_memory_allocated() - before,
                "flush_bytes": flush_bytes,
            }
            # What this process may hold: what its allocator holds now plus what the device
            # has free, within a cap where one is set.
            available = available_memory(self.memory_cap) + torch.cuda.memory_reserved()
            keep, needed = plan_draws(len(seeds), sizes, available, device_name)
            for seed in seeds[1:keep]:
                try:
                    self.draws.append(self.make_draw(problem, seed))
                except torch.OutOfMemoryError:
                    if len(self.draws) < 2:
                        raise InputsDoNotFit(
                            f"the problem's inputs do not fit on {device_name}: "
                            f"{gib(needed[1])} needed, {gib(available)} free"
                        ) from None
                    break
        if len(self.draws) < len(seeds):
            print(
                f"kactors evaluator: {len(self.draws)} of {len(seeds)} input draws kept: "
                f"{len(seeds)} need {gib(needed[-1])}, {gib(available)} free",
                file=sys.stderr,
                flush=True,
            )
        return {"available_bytes": available, "needed_bytes": needed, **sizes}

    def make_draw(self, problem, seed):
        inputs = kernel_call.draw_inputs(torch, problem, self.dtype, seed)
        with torch.no_grad():
            expected = as_tensor_list(self.model(*inputs), "Model.forward")
        return Draw(seed, inputs, [t.detach() for t in expected])

    def warm_up_own_paths(self):
        """The comparison, the checksums, the events and the CPU's thread pool have first-use
        costs, and starting a thread pool inside a candidate's call would look like a thread the
        candidate left: pay them here, in setup_s, not in the first candidate's overhead."""
        probe = torch.ones(1024, device="cuda", dtype=self.dtype)
        with torch.no_grad(), self.recorder_class(torch.cuda.current_stream().cuda_stream):
            copy = torch.empty_like(probe)
            copy.copy_(probe)
        compare(copy, probe, self.atol, self.rtol)
        checksum([copy])
        checksums_of([copy, self.l2_flush])
        torch.ones(1 << 16).sum().item()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        self.l2_flush.zero_()
        end.record()
        end.synchronize()
        start.elapsed_time(end)

    def kept_tensors(self):
        """(name, tensor) for every tensor the evaluator keeps between requests, as they are now."""
        for index, draw in enumerate(self.draws):
            for position, value in enumerate(draw.inputs):
                if isinstance(value, torch.Tensor):
                    yield f"draw {index} input {position}", value
            for position, value in enumerate(draw.expected):
                yield f"draw {index} reference {position}", value
        for name, value in self.model.named_parameters():
            yield f"model parameter {name}", value
        for name, value in self.model.named_buffers():
            yield f"model buffer {name}", value
        yield "L2 flush buffer", self.l2_flush

    def reset_memory_baseline(self):
        """What the evaluator itself holds on the device: after a candidate is unloaded, no more
        may stay allocated, and no more reserved once the allocator's cache is emptied."""
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        self.memory_baseline = torch.cuda.memory_allocated()
        self.reserved_baseline = torch.cuda.memory_reserved()

    # -- requests -------------------------------------------------------------------------------

    def handle(self, request):
        """The reply to one request past its type and id: {"ok": True, ...} or a failure."""
        op = request.get("op")
        if op in ("verify", "time"):
            return self.judge(op, request)
        if op == "time_reference":
            body = self.time_reference(request)
            # PyTorch's own code (torch.compile's above all) may keep memory: the new baseline.
            self.reset_memory_baseline()
            return {"ok": True, **body}
        raise EvaluatorError(f"unknown op {op!r}; accepted: verify, time, time_reference, shutdown")

    def failure(self, error):
        """A failed request's reply fields (called inside the `except`)."""
        return failed_reply(error, is_poisoned_context_error(error) or not context_is_usable())

    def judge(self, op, request):
        """Runs a verify or time request, then audits what the candidate's code left behind.

        A change to the evaluator's state makes the verdict "tampered with the evaluator's
        state", whatever the candidate's output was; after that, after any failure of the
        candidate's code and after any rejection that is not a plain wrong answer the reply says
        `restarting`: the child exits and the zygote forks a fresh one.
        """
        self.state_before = None
        self.ran_candidate_code = False
        body = failure = None
        try:
            body = self.verify(request) if op == "verify" else self.time_candidate(request)
        except BaseException as error:  # a candidate may raise anything, SystemExit included
            if is_poisoned_context_error(error) or not context_is_usable():
                return failed_reply(error, fatal=True)
            failure = failed_reply(error, fatal=False)
        plain = body is not None and body.pop("plain", False)
        ends_candidate = body is None or op == "time" or not body["passed"]
        if ends_candidate:
            self.unload_candidate()
        reply = failure if body is None else {"ok": True, **body}
        if self.integrity and self.state_before is not None:
            started = time.perf_counter()
            try:
                checksums, changes = self.audit(ends_candidate)
            except BaseException as error:
                # A sticky device error shows here at the latest: the synchronize fails.
                if is_poisoned_context_error(error) or not context_is_usable():
                    return failed_reply(error, fatal=True)
                # Whatever broke the audit itself was done to the evaluator's state.
                checksums = []
                changes = [f"the evaluator's own audit failed: {type(error).__name__}: {error}"]
            integrity = {"checksums": checksums, "audit_s": round(time.perf_counter() - started, 4)}
            if changes:
                found = "; ".join(changes)
                reason = f"{TAMPERED}: {found}"
                verdict = unjudged_verdict() if op == "verify" else {}
                if op == "verify" and body is not None:
                    verdict.update(body)
                verdict.update(passed=False, reason=reason)
                return {
                    "ok": True,
                    **verdict,
                    "tampered": found,
                    "integrity": integrity,
                    "restarting": True,
                }
            reply["integrity"] = integrity
        rejected = body is not None and not body["passed"] and not plain
        reply["restarting"] = self.ran_candidate_code and (failure is not None or rejected)
        return reply

    def begin_candidate_code(self):
        """Called right before the candidate's code first runs in a request (its import, or its
        first call): what the audit compares with."""
        self.ran_candidate_code = True
        if self.integrity:
            self.state_before = self.snapshot()

    def audit(self, candidate_unloaded):
        """(each kept tensor's checksum, what changed since begin_candidate_code)."""
        torch.cuda.synchronize()
        named = list(self.kept_tensors())
        checksums = checksums_of([tensor for _, tensor in named])
        names = [name for name, _ in named]
        changes = []
        if names != self.tensor_names:
            changes.append(f"the evaluator's tensors are now {names}, not {self.tensor_names}")
        else:
            changes.extend(
                f"{name} changed (its GPU checksum differs)"
                for name, now, then in zip(names, checksums, self.expected_checksums)
                if now != then
            )
        sections, tasks, threads, children = self.state_before
        changes.extend(state_changes(sections, self.snapshot()[0]))
        changes.extend(self.left_running(tasks, threads, children))
        if candidate_unloaded:
            changes.extend(self.leftover_memory())
        return checksums, changes

    def snapshot(self):
        """(sections for state_changes, thread ids, Python thread idents, child processes).

        A section that cannot be read (an attribute this Triton lacks) is recorded as such: the
        same in every snapshot, it reports nothing, and it never fails a candidate.
        """
        sections = {}

        def add(label, additions_count, read):
            try:
                sections[label] = (additions_count, read())
            except Exception as error:
                sections[label] = (False, {"(unreadable)": ("value", type(error).__name__)})

        for label, namespace, callables_only, additions_count in self.namespaces:
            add(
                label,
                additions_count,
                lambda namespace=namespace, callables_only=callables_only: namespace_keys(
                    namespace, callables_only
                ),
            )
        add(
            "evaluator state: ",
            True,
            lambda: {k: identity_key(v) for k, v in vars(self).items() if k not in self.VOLATILE},
        )
        add("evaluator data: ", False, self.data_keys)
        add(
            "sys.modules entry ",
            False,
            lambda: {
                name: (id(module),)
                for name, module in list(sys.modules.items())
                if name in WATCHED_MODULES or name.split(".")[0] == "triton"
            },
        )
        add(
            "triton's driver: ",
            False,
            lambda: {k: identity_key(v) for k, v in vars(triton.runtime.driver.active).items()},
        )
        for name, kernel in (
            ("compare_blocks", compare_blocks),
            ("checksum_blocks", checksum_blocks),
        ):
            add(f"evaluator kernel {name}: ", False, lambda kernel=kernel: kernel_keys(kernel))
        add("setting ", True, settings_snapshot)
        add("setting $", True, lambda: {k: repr(v) for k, v in os.environ.items()})
        return (
            sections,
            set(task_names()),
            {thread.ident for thread in threading.enumerate()},
            children_of(os.getpid()),
        )

    def data_keys(self):
        keys = {"draws": (id(self.draws), len(self.draws))}
        for index, draw in enumerate(self.draws):
            keys[f"draw {index}"] = (
                id(draw),
                id(draw.inputs),
                id(draw.expected),
                draw.seed,
                draw.expected_sums,
                tuple(identity_key(v) for v in draw.inputs),
                tuple(id(t) for t in draw.expected),
            )
        for name, tensor in self.kept_tensors():
            keys[name] = (
                id(tensor),
                tensor.data_ptr(),
                tuple(tensor.shape),
                tuple(tensor.stride()),
                tensor.storage_offset(),
                str(tensor.dtype),
                str(tensor.device),
            )
        for name, module in self.model.named_modules():
            keys[f"model module {name or '(root)'}"] = tuple(
                sorted((k, identity_key(v)) for k, v in vars(module).items())
            ) + tuple(len(v) for k, v in sorted(vars(module).items()) if k.endswith("_hooks"))
        keys["allowlist"] = tuple(sorted(self.allowlist.items()))
        keys["settings"] = tuple(sorted((k, repr(v)) for k, v in vars(self.settings).items()))
        return keys

    def left_running(self, tasks, threads, children):
        """Threads and processes that the candidate started and left running."""
        found = []
        python = [t for t in threading.enumerate() if t.ident not in threads and not torch_owned(t)]
        if python:
            found.append(f"it left Python threads running: {', '.join(t.name for t in python)}")
        python_ids = {str(t.native_id) for t in python}
        torch_ids = {str(t.native_id) for t in threading.enumerate() if torch_owned(t)}
        native = {
            task: name
            for task, name in task_names().items()
            # The CUDA driver and torch's C++ start helper threads of their own (cuda-EvtHandlr,
            # pt_autograd_0 and others).
            if task not in tasks
            and task not in python_ids
            and task not in torch_ids
            and not name.startswith(("cuda", "pt_"))
        }
        if native:
            found.append(f"it left threads running: {', '.join(sorted(native.values()))}")
        processes = children_of(os.getpid()) - children
        if processes:
            found.append(
                f"it left child processes running: pids {', '.join(map(str, sorted(processes)))}"
            )
        return found

    def leftover_memory(self):
        """Device memory a candidate kept after it was unloaded: tensors stashed where the
        evaluator does not look, a CUDA graph or a memory pool."""
        found = []
        torch.cuda.synchronize()
        if torch.cuda.memory_allocated() > self.memory_baseline:
            gc.collect()
        allocated = torch.cuda.memory_allocated()
        if allocated > self.memory_baseline:
            found.append(
                f"{allocated - self.memory_baseline} bytes of device memory stayed allocated "
                f"after the candidate was unloaded"
            )
        torch.cuda.empty_cache()
        reserved = torch.cuda.memory_reserved()
        if reserved > self.reserved_baseline:
            found.append(
                f"{reserved - self.reserved_baseline} bytes of device memory stayed reserved "
                f"after the candidate was unloaded (a CUDA graph or a memory pool)"
            )
        return found

    def load_candidate(self, path):
        self.candidate = None
        if not path.is_file():
            raise EvaluatorError(f"candidate {path} does not exist")
        self.candidates_loaded += 1
        # Generated code is untrusted: whatever it writes by a relative path lands in its own
        # folder of the run directory, never in the kernel directory or another candidate's.
        os.chdir(path.parent)
        name = f"kactors_candidate_{self.candidates_loaded}"
        sys.modules.pop(f"kactors_candidate_{self.candidates_loaded - 1}", None)
        self.begin_candidate_code()
        module = kernel_call.load_module(path, name)
        try:
            function = kernel_call.kernel_function_of(module, path)
            binding = kernel_call.bind(function, len(self.draws[0].inputs), self.model)
        except kernel_call.CallError as error:
            raise Rejection(str(error)) from None
        self.candidate = Candidate(path, module, function, binding)
        return self.candidate

    def unload_candidate(self):
        candidate, self.candidate = self.candidate, None
        if candidate is not None:
            sys.modules.pop(candidate.module.__name__, None)

    def fresh_inputs(self, draw):
        return clone_values(draw.inputs)

    def verify(self, request):
        path = Path(request["candidate"])
        set_triton_cache_dir(Path(request["cache_dir"]))
        verdict = unjudged_verdict()
        try:
            candidate = self.load_candidate(path)
            # Failed until proven otherwise: an exception below leaves it untimeable.
            candidate.passed = False
            self.check_candidate(candidate, verdict)
            candidate.passed = verdict["passed"] = True
        except Rejection as rejection:
            verdict["reason"] = str(rejection)
            verdict["plain"] = rejection.plain
        return verdict

    def check_candidate(self, candidate, verdict):
        fn, timing_stream = candidate.function, torch.cuda.current_stream().cuda_stream
        # The first call compiles and autotunes, outside the aten recorder: Triton's autotuner
        # runs PyTorch operations of its own (cache flushes, timing) that are not the candidate's.
        inputs = self.fresh_inputs(self.draws[0])
        started = time.perf_counter()
        with self.launch_log.window(), torch.no_grad():
            args, kwargs = candidate.binding.arguments(inputs)
            result = fn(*args, **kwargs)
            torch.cuda.synchronize()
        verdict["compile_s"] = round(time.perf_counter() - started, 4)
        # Every buffer the candidate could hand back again is held and holds NaN from here on:
        # a reused buffer is rejected by address, and an unwritten one cannot pass as an answer.
        held = self.output_tensors(result, inputs)
        for tensor in held:
            poison(tensor)
        held_storages = {storage_of(t) for t in held}
        del result, inputs, args, kwargs
        launched, aten_ops = [], []
        run_s = 0.0
        mutates, side_streams = False, False
        previous_sums = None
        for index, draw in enumerate(self.draws):
            inputs = self.fresh_inputs(draw)
            args, kwargs = candidate.binding.arguments(inputs)
            if index == 0:
                # The verified call, as the profiled wrapper's measured call must be too.
                kernel_call.record_call("evaluator", candidate.path, fn, args, kwargs)
            recorder = self.recorder_class(timing_stream)
            started = time.perf_counter()
            with self.launch_log.window() as log, torch.no_grad():
                with recorder:
                    result = fn(*args, **kwargs)
                torch.cuda.synchronize()
            run_s += time.perf_counter() - started
            verdict["run_s"] = round(run_s, 4)
            for name in log.names:
                if name not in launched:
                    launched.append(name)
            for name in recorder.ops:
                if name not in aten_ops:
                    aten_ops.append(name)
            verdict["launched"], verdict["aten_ops"] = launched, aten_ops
            side_streams = side_streams or recorder.off_stream
            side_streams = side_streams or any(s != timing_stream for s in log.streams)
            self.check_own_work(log.names, recorder.ops, f"draw {index}")
            outputs = self.output_tensors(result, inputs)
            input_storages = {storage_of(v) for v in inputs if isinstance(v, torch.Tensor)}
            for tensor in outputs:
                storage = storage_of(tensor)
                if storage in held_storages:
                    raise Rejection(
                        f"kernel_function returned the same output buffer for different inputs "
                        f"(draw {index} got a buffer an earlier call returned)"
                    )
            self.check_outputs(outputs, draw, f"draw {index} (seed {draw.seed})", verdict)
            sums = checksum(outputs)
            if (
                index > 0
                and sums == previous_sums
                and draw.expected_sums != self.draws[index - 1].expected_sums
            ):
                raise Rejection(
                    f"the output did not change when the inputs did (draws {index - 1} and {index})",
                    plain=True,
                )
            previous_sums = sums
            mutates = mutates or any(
                isinstance(mine, torch.Tensor) and not torch.equal(mine, pristine)
                for mine, pristine in zip(inputs, draw.inputs)
            )
            mutates = mutates or any(storage_of(t) in input_storages for t in outputs)
            for tensor in outputs:
                poison(tensor)
            held.extend(outputs)
            held_storages.update(storage_of(t) for t in outputs)
            del result, inputs, args, kwargs
        candidate.kernel_names = launched
        candidate.mutates_inputs = mutates
        candidate.side_streams = side_streams

    def check_own_work(self, launch_names, op_names, which):
        if not launch_names:
            raise Rejection(f"no triton kernel launched during kernel_function ({which})")
        generated = sorted({n for n in launch_names if INDUCTOR_KERNEL_NAME.match(n)})
        if generated:
            raise Rejection(
                f"kernel_function launched kernels generated by torch.compile, not its own: "
                f"{', '.join(generated)} ({which})"
            )
        rejected = disallowed_ops(op_names, self.allowlist)
        if rejected:
            raise Rejection(
                f"kernel_function ran PyTorch operations that are not allowed: "
                f"{', '.join(rejected)} ({which}); see data/aten_allowlist.yaml"
            )

    def output_tensors(self, result, inputs):
        if result is None:
            # KernelAgent's in-place convention: the result is written into the first input.
            if not inputs or not isinstance(inputs[0], torch.Tensor):
                raise Rejection("kernel_function returned None and its first input is not a tensor")
            return [inputs[0]]
        return as_tensor_list(result, "kernel_function")

    def check_outputs(self, outputs, draw, which, errors):
        """Rejects outputs unlike the draw's reference; errors' max_abs_err and max_rel_err
        grow to the largest seen, also when the outputs are rejected."""
        if len(outputs) != len(draw.expected):
            raise Rejection(
                f"kernel_function returned {len(outputs)} tensors, the reference "
                f"{len(draw.expected)} ({which})",
                plain=True,
            )
        for position, (actual, expected) in enumerate(zip(outputs, draw.expected)):
            label = which if len(outputs) == 1 else f"{which}, output {position}"
            if actual.device.type != expected.device.type:
                raise Rejection(
                    f"output is on {actual.device}, expected {expected.device} ({label})",
                    plain=True,
                )
            if tuple(actual.shape) != tuple(expected.shape):
                raise Rejection(
                    f"output shape {tuple(actual.shape)}, expected {tuple(expected.shape)} "
                    f"({label})",
                    plain=True,
                )
            max_abs, max_rel, bad, nonfinite = compare(actual, expected, self.atol, self.rtol)
            errors["max_abs_err"] = max(errors["max_abs_err"] or 0.0, max_abs)
            errors["max_rel_err"] = max(errors["max_rel_err"] or 0.0, max_rel)
            if nonfinite:
                raise Rejection(f"output holds {nonfinite} NaN or Inf values ({label})", plain=True)
            if bad:
                raise Rejection(
                    f"{bad} of {actual.numel()} output elements exceed atol={self.atol}, "
                    f"rtol={self.rtol}: max abs err {max_abs:.6g}, max rel err {max_rel:.6g} "
                    f"(output dtype {actual.dtype}, reference dtype {expected.dtype}) ({label})",
                    plain=True,
                )

    def time_candidate(self, request):
        path = Path(request["candidate"])
        warmup, repeat = self.benchmark_counts(request)
        candidate = self.candidate
        if candidate is None or candidate.path != path:
            # A restarted evaluator: compile again (its Triton cache makes that quick) and time
            # it the careful way, since what verify would have learnt about it is unknown.
            cache_dir = request.get("cache_dir") or str(Path.cwd() / "triton-cache" / path.stem)
            set_triton_cache_dir(Path(cache_dir))
            try:
                candidate = self.load_candidate(path)
            except Rejection as rejection:
                return self.rejected(str(rejection), rejection.plain)
            warmup = max(warmup, 1)
        elif candidate.passed is False:
            raise EvaluatorError(f"candidate {path} failed verification; it is not timed")
        else:
            self.begin_candidate_code()
        return self.benchmark(
            candidate.function,
            candidate.binding,
            warmup,
            repeat,
            restore_every_call=candidate.mutates_inputs,
            device_wide_end=candidate.side_streams,
            candidate_kernels=candidate.kernel_names,
        )

    def time_reference(self, request):
        which = request.get("which")
        warmup, repeat = self.benchmark_counts(request)
        if which == "eager":
            function = self.model
        elif which == "compile":
            # Inductor's own Triton kernels go to a cache of their own, not a candidate's.
            set_triton_cache_dir(Path.cwd() / "triton-cache" / "torch-compile")
            if self.compiled_model is None:
                self.compiled_model = torch.compile(self.model)
                # The first call compiles; it must not be a sample.
                warmup = max(warmup, 1)
            function = self.compiled_model
        else:
            raise EvaluatorError(f"time_reference which={which!r}; accepted: eager, compile")
        return self.benchmark(
            function,
            kernel_call.Binding([], []),
            warmup,
            repeat,
            restore_every_call=False,
            device_wide_end=False,
            candidate_kernels=None,
        )

    def benchmark_counts(self, request):
        warmup = request.get("warmup")
        repeat = request.get("repeat")
        warmup = self.settings.benchmark_warmup if warmup is None else warmup
        repeat = self.settings.benchmark_repeat if repeat is None else repeat
        for key, value, minimum in (("warmup", warmup, 0), ("repeat", repeat, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise EvaluatorError(f"{key} must be a whole number >= {minimum}, got {value!r}")
        return warmup, repeat

    def benchmark(
        self, fn, binding, warmup, repeat, restore_every_call, device_wide_end, candidate_kernels
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
        draws = self.draws
        working = [self.fresh_inputs(d) for d in draws]
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
        samples, launch_counts = [], []
        torch.cuda.synchronize()
        for call in range(total):
            index = call % len(draws)
            checked = call in checked_calls
            if checked:
                # A fresh copy at a new address: a result cached by input address cannot answer.
                args = self.fresh_inputs(draws[index])
            else:
                args = working[index]
                if restore_every_call:
                    for mine, pristine in zip(args, draws[index].inputs):
                        if isinstance(mine, torch.Tensor):
                            mine.copy_(pristine)
            is_candidate = candidate_kernels is not None
            recorder = self.recorder_class(timing_stream) if checked and is_candidate else None
            self.l2_flush.zero_()
            with self.launch_log.window() as log, torch.no_grad():
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
            which = f"timed call {call - warmup}" if call >= warmup else f"warm-up call {call}"
            which = f"{which}, draw {index}"
            if is_candidate:
                if not log.names:
                    return self.rejected(
                        f"{which} launched no Triton kernel: its result came from somewhere else"
                    )
                if candidate_kernels and not set(log.names) & set(candidate_kernels):
                    return self.rejected(
                        f"{which} launched {sorted(set(log.names))}, none of the kernels verified "
                        f"({', '.join(candidate_kernels)})"
                    )
            if call >= warmup:
                samples.append(elapsed_ms)
                launch_counts.append(len(log.names))
            if checked:
                try:
                    if recorder is not None:
                        self.check_own_work(log.names, recorder.ops, which)
                    if is_candidate:
                        outputs = self.output_tensors(result, args)
                    else:
                        outputs = as_tensor_list(result, "Model.forward")
                    errors = {"max_abs_err": None, "max_rel_err": None}
                    self.check_outputs(outputs, draws[index], which, errors)
                except Rejection as rejection:
                    return self.rejected(str(rejection), rejection.plain)
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
        }

    @staticmethod
    def rejected(reason, plain=False):
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


def serve_child(evaluator, connection):
    """The evaluator child, forked by the zygote: makes the CUDA context, builds the inputs and
    references, says `ready` and serves requests over `connection` (never fds 3 and 4)."""
    guard_audit_hooks()
    requests = connection.makefile("r", encoding="utf-8")
    channel = Channel(connection.makefile("w", encoding="utf-8"))
    try:
        ready = evaluator.start()
    except (Exception, SystemExit) as error:
        channel.send(startup_failed(error))
        return 2
    channel.send(sanitize(ready))
    return serve(evaluator, requests, channel)


def guard_audit_hooks():
    """Audit hooks cannot be removed once added, and run inside whatever runs later: refuse
    every new one, so that no candidate can leave code behind that way."""

    def refuse_new_hooks(event, _args):
        if event == "sys.addaudithook":
            raise RuntimeError("the kactors evaluator accepts no audit hooks")

    sys.addaudithook(refuse_new_hooks)


# ---------------------------------------------------------------------------------------------
# The zygote and its children's processes (no torch needed)

REQUESTS_FD = 3
REPLIES_FD = 4
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def prctl(option, value):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), *(ctypes.c_ulong(0),) * 3) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"prctl({option}, {value}): {os.strerror(number)}")


def children_of(pid):
    """The ids of the processes whose parent is `pid`, zombies included."""
    found = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as listing:
                found.update(int(word) for word in listing.read().split())
        return found
    except (OSError, ValueError):
        # No children file in this kernel, or a thread ended meanwhile: read every process.
        return children_by_scan(pid)


def children_by_scan(pid):
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.add(int(entry))
    return found


def describe_status(status):
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    if os.WIFEXITED(status):
        return f"exit status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def excerpt(line, limit=300):
    text = line.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "…"


class LineReader:
    """Lines from a descriptor, read as select() says there is data."""

    def __init__(self, fd, limit):
        self.fd = fd
        self.limit = limit
        self.buffer = bytearray()
        self.closed = False

    def line(self):
        """The next whole line without its newline, or None. A line longer than the limit is an
        error: its writer is broken."""
        end = self.buffer.find(b"\n")
        if end < 0:
            if len(self.buffer) > self.limit:
                raise EvaluatorError(f"a line of more than {self.limit} bytes")
            return None
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return line

    def has_line(self):
        return b"\n" in self.buffer

    def read_some(self):
        try:
            chunk = os.read(self.fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if chunk:
            self.buffer += chunk
        else:
            self.closed = True


class Child:
    """One evaluator child as the zygote sees it."""

    def __init__(self, pid, connection):
        self.pid = pid
        self.connection = connection
        self.reader = LineReader(connection.fileno(), MAX_CHILD_LINE)
        self.status = None
        try:
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def exited(self):
        """Whether it exited (and was reaped), without waiting."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid == self.pid:
                self.status = status
        return self.status is not None

    def exit_status(self, timeout):
        """How it ended, waiting up to `timeout` seconds for it to end; None if it did not."""
        deadline = time.monotonic() + timeout
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        return describe_status(self.status) if self.status is not None else None

    def next_line(self):
        """Its next line, or None once it exited or closed its end (what it wrote before is
        read first). A line over the limit raises EvaluatorError."""
        self.connection.setblocking(False)
        while True:
            line = self.reader.line()
            if line is not None:
                return line
            if self.reader.closed or self.exited():
                self.drain()
                if not self.reader.has_line():
                    return None
                continue
            watched = [self.connection.fileno()] + ([self.pidfd] if self.pidfd else [])
            readable, _, _ = select.select(watched, [], [], None if self.pidfd else 0.2)
            if self.connection.fileno() in readable:
                self.reader.read_some()

    def drain(self):
        """Reads what it wrote before it exited (a descendant may hold its end open: no wait)."""
        self.connection.setblocking(False)
        while not self.reader.closed:
            before = len(self.reader.buffer)
            self.reader.read_some()
            if len(self.reader.buffer) == before:
                return


class Zygote:
    """The process kactors starts: forks evaluator children, relays the protocol, replaces them.

    `make_child(connection)` runs in a freshly forked child and returns its exit status; the
    child's first line is `ready` or `startup_failed`, then one reply per request. The zygote
    never runs a candidate: it only forwards lines, and checks that each line from a child is
    the reply to the request it forwarded (the id matches). A child that writes anything else,
    or anything when no request is pending, or dies, or says `restarting`, is killed with all
    its descendants (the zygote is their subreaper) and a fresh child is forked, whose `ready`
    goes to kactors before the next reply. `fork_hazard()` says why forking is unsafe, or None.
    """

    def __init__(self, make_child, fork_hazard=lambda: None, log=sys.stderr):
        self.make_child = make_child
        self.fork_hazard = fork_hazard
        self.log = log
        self.child = None
        self.generation = -1

    def run(self, requests_fd=REQUESTS_FD, replies_fd=REPLIES_FD):
        self.requests_fd = requests_fd
        self.replies_fd = replies_fd
        self.requests = LineReader(requests_fd, MAX_CHILD_LINE)
        self.own_descendants()
        try:
            if not self.start_child():
                return 2
            while True:
                line = self.requests.line()
                if line is None:
                    if self.requests.closed:
                        return 0
                    if self.wait_for_request():
                        self.requests.read_some()
                    elif not self.restart("it wrote or exited while no request was pending"):
                        return 2
                    continue
                if not self.forward(line):
                    return 0 if self.stopping else 2
        finally:
            self.stop_child()

    def own_descendants(self):
        """Orphans of a child's descendants become the zygote's, so that it can end them; and no
        process of the same user may read or write the zygote's memory."""
        for option, value in ((PR_SET_CHILD_SUBREAPER, 1), (PR_SET_DUMPABLE, 0)):
            try:
                prctl(option, value)
            except OSError as error:
                self.note(f"cannot protect the zygote: {error}")

    def note(self, text):
        print(f"kactors evaluator zygote: {text}", file=self.log, flush=True)

    def send(self, message):
        self.send_line(json.dumps(message, allow_nan=False).encode())

    def send_line(self, line):
        data = line + b"\n"
        while data:
            written = os.write(self.replies_fd, data)
            data = data[written:]

    def wait_for_request(self):
        """True when kactors wrote; False when the child wrote or exited meanwhile."""
        while True:
            watched = [self.requests_fd, self.child.connection.fileno()]
            if self.child.pidfd is not None:
                watched.append(self.child.pidfd)
            readable, _, _ = select.select(watched, [], [], None if self.child.pidfd else 0.2)
            if self.requests_fd in readable:
                return True
            if readable or self.child.exited():
                return False

    def forward(self, line):
        """Relays one request and its reply; False when the zygote must end."""
        self.stopping = False
        request_id, op = request_header(line)
        if op == "shutdown":
            self.send({"type": "reply", "id": request_id, "ok": True, "seconds": 0.0})
            self.stopping = True
            return False
        started = time.perf_counter()
        try:
            self.child.connection.sendall(line + b"\n")
        except OSError:
            pass  # its death is seen below
        outcome, detail = self.await_reply(request_id)
        if outcome in ("reply", "restarting"):
            self.send_line(detail)
            return True if outcome == "reply" else self.restart("its reply says it restarts")
        seconds = round(time.perf_counter() - started, 4)
        header = {"type": "reply", "id": request_id, "seconds": seconds, "restarting": True}
        if outcome == "broke" and op in ("verify", "time"):
            # Only the candidate's code can have written this line: the child writes replies.
            found = f"it wrote into the evaluator's reply channel: {detail}"
            verdict = unjudged_verdict() if op == "verify" else {}
            verdict.update(passed=False, reason=f"{TAMPERED}: {found}", tampered=found)
            self.send({**header, "ok": True, **verdict})
        elif outcome == "broke":
            error = f"the evaluator child broke the protocol: {detail}"
            self.send({**header, "ok": False, "error": error, "traceback": None, "fatal": False})
        else:
            error = f"the evaluator child died without answering ({detail})"
            self.send({**header, "ok": False, "error": error, "traceback": None, "fatal": True})
        return self.restart(f"it {outcome}: {detail}")

    def await_reply(self, request_id):
        """("reply" or "restarting", the reply line), ("broke", an excerpt of what it wrote
        instead) or ("died", how)."""
        try:
            line = self.child.next_line()
        except EvaluatorError as error:
            return "broke", str(error)
        if line is None:
            return "died", self.child.exit_status(1.0) or "it closed its end of the channel"
        message = json_object(line)
        if message.get("type") != "reply" or message.get("id") != request_id:
            return "broke", excerpt(line)
        return ("restarting" if message.get("restarting") is True else "reply"), line

    def restart(self, why):
        self.note(f"child {self.generation} ends ({why}); forking a fresh one")
        self.stop_child()
        return self.start_child()

    def start_child(self):
        """Forks a child and forwards its first line; False when it could not start."""
        hazard = self.fork_hazard()
        if hazard is not None:
            self.send({"type": "startup_failed", "error": hazard, "traceback": None})
            return False
        self.generation += 1
        ours, theirs = socket.socketpair()
        zygote = os.getpid()
        pid = os.fork()
        if pid == 0:
            status = 70
            try:
                ours.close()
                os.close(self.requests_fd)
                os.close(self.replies_fd)
                prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                # Only the zygote needs to be out of reach of other processes.
                prctl(PR_SET_DUMPABLE, 1)
                if os.getppid() == zygote:
                    status = self.make_child(theirs)
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status if isinstance(status, int) else 70)
        theirs.close()
        self.child = Child(pid, ours)
        first, why = self.first_line()
        if first is None:
            self.send({"type": "startup_failed", "error": why, "traceback": None})
            self.stop_child()
            return False
        first["generation"] = self.generation
        self.send(first)
        if first["type"] != "ready":
            self.stop_child()
            return False
        return True

    def first_line(self):
        """(the child's ready or startup_failed message, None) or (None, what went wrong)."""
        try:
            line = self.child.next_line()
        except EvaluatorError as error:
            return None, f"the evaluator child's first line is too long: {error}"
        if line is None:
            status = self.child.exit_status(1.0) or "it closed its end of the channel"
            return None, f"the evaluator child exited before it was ready ({status})"
        message = json_object(line)
        if message.get("type") in ("ready", "startup_failed"):
            return message, None
        return None, f"the evaluator child's first line is not its ready message: {excerpt(line)}"

    def stop_child(self):
        """Kills the child and every process descended from it, and reaps them all."""
        child, self.child = self.child, None
        if child is None:
            return
        if not child.exited():
            try:
                os.kill(child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(child.pid, 0)
            except ChildProcessError:
                pass
        child.connection.close()
        if child.pidfd is not None:
            os.close(child.pidfd)
        # The child's orphans are the zygote's now; each killed one may hand over more.
        for _ in range(1000):
            orphans = children_of(os.getpid())
            if not orphans:
                return
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for pid in orphans:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
        self.note("descendants of an evaluator child kept appearing; some may be left")


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


def classify_ops(allowlist_path, op_names):
    allowlist = load_allowlist(allowlist_path)
    rejected = disallowed_ops(op_names, allowlist)
    print(json.dumps({"allowed": [n for n in op_names if n not in rejected], "rejected": rejected}))
    return 0


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
        evaluator = Evaluator(args.kernel_dir.resolve(), settings)
        evaluator.prepare()
    except (Exception, SystemExit) as error:
        Channel(os.fdopen(REPLIES_FD, "w", encoding="utf-8")).send(startup_failed(error))
        return 2
    zygote = Zygote(lambda connection: serve_child(evaluator, connection), evaluator.fork_hazard)
    return zygote.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
