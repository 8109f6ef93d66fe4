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

`evaluator.py --classify-ops --allowlist FILE OP...` prints which aten operation names the
allowlist accepts, without importing torch: the allowlist logic is tested in CI that way.
"""

import argparse
import contextlib
import importlib.util
import inspect
import json
import linecache
import math
import os
import platform
import re
import sys
import time
import traceback
from pathlib import Path

try:
    import triton
    import triton.language as tl
except ImportError:
    # The --classify-ops mode needs neither, and CI runs it without them.
    triton = tl = None
# Imported by import_gpu_stack(): it takes seconds, which --classify-ops need not spend.
torch = None

DTYPE_ALIASES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
}
# atol = rtol by dtype, as KernelAgent's test.py uses for bf16.
DEFAULT_TOLERANCE = {"bfloat16": 1e-2, "float16": 1e-2, "float32": 1e-4}
DEFAULT_DTYPE = "bfloat16"
MIN_L2_FLUSH_BYTES = 256 << 20
# Elements per program of the comparison kernel.
COMPARE_BLOCK = 4096
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
    """A candidate that ran but broke a rule; the message is the verdict's reason."""


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


class LaunchLog:
    """Triton's launch-enter hook: the names and streams of the launches made while active.

    Installed once; every launch of every @triton.jit kernel goes through it. Launches outside
    an active window (the evaluator's own work has none) cost one attribute test.
    """

    def __init__(self):
        self.active = False
        self.names = []
        self.streams = []

    def __call__(self, metadata):
        if not self.active:
            return
        # Triton passes a LazyDict whose .data holds name, function and stream; reading .data
        # avoids evaluating a kernel's own launch_metadata callback.
        data = getattr(metadata, "data", metadata)
        if isinstance(data, dict):
            self.names.append(str(data.get("name")))
            self.streams.append(data.get("stream"))
        else:
            self.names.append(repr(metadata))
            self.streams.append(None)

    @contextlib.contextmanager
    def window(self):
        self.names = []
        self.streams = []
        self.active = True
        try:
            yield self
        finally:
            self.active = False


def install_launch_hook(hook):
    knobs = getattr(triton, "knobs", None)
    runtime = getattr(knobs, "runtime", None)
    if runtime is None:
        from triton.compiler import CompiledKernel

        CompiledKernel.launch_enter_hook = hook
        return
    current = runtime.launch_enter_hook
    if hasattr(current, "add"):
        # Triton 3.7 and later keep a HookChain here.
        current.add(hook)
    elif current is None:
        runtime.launch_enter_hook = hook
    else:

        def both(metadata):
            current(metadata)
            hook(metadata)

        runtime.launch_enter_hook = both


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


def load_module(path, name):
    linecache.checkcache(str(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise EvaluatorError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


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


def cast_input(value, dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.to(dtype)
    return value


def clone_values(values):
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def clone_kwargs(kwargs):
    return {
        k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()
    }


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


def model_attribute(model, name):
    """The attribute `name` of the model or, failing that, of its first submodule that has one."""
    for module in model.modules():
        if name in module.__dict__ or name in module._parameters or name in module._buffers:
            return True, getattr(module, name)
    return False, None


def bind_model_attributes(function, input_count, model):
    """Keyword arguments for kernel_function's parameters beyond the problem's inputs.

    KernelAgent's convention: kernel_function(*inputs, weight=..., eps=...), where each extra
    parameter is named after an attribute of the PyTorch model.
    """
    parameters = inspect.signature(function).parameters.values()
    positional = 0
    takes_varargs = False
    kwargs = {}
    for p in parameters:
        if p.kind is p.VAR_POSITIONAL:
            takes_varargs = True
            continue
        if p.kind is p.VAR_KEYWORD:
            continue
        if (
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and positional < input_count
            and not takes_varargs
        ):
            positional += 1
            continue
        if p.name.startswith("_"):
            found = False
        else:
            found, value = model_attribute(model, p.name)
        if found and p.kind is not p.POSITIONAL_ONLY:
            kwargs[p.name] = value
        elif p.default is p.empty:
            raise Rejection(
                f"kernel_function parameter {p.name!r} is neither one of the problem's "
                f"{input_count} inputs nor an attribute of the model"
            )
    if positional < input_count and not takes_varargs:
        raise Rejection(
            f"kernel_function takes {positional} positional parameters, the problem has "
            f"{input_count} inputs"
        )
    return kwargs


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
    def __init__(self, path, module, function, kwargs):
        self.path = path
        self.module = module
        self.function = function
        self.kwargs = kwargs
        # None until a verify request of this process has judged it.
        self.passed = None
        self.kernel_names = []
        # Unknown until verified: time such a candidate the careful way.
        self.mutates_inputs = True
        self.side_streams = True


class Evaluator:
    def __init__(self, kernel_dir, settings):
        self.kernel_dir = kernel_dir
        self.settings = settings
        self.allowlist = load_allowlist(settings.allowlist_path)
        self.launch_log = LaunchLog()
        self.recorder_class = None
        self.candidate = None
        self.candidates_loaded = 0
        self.compiled_model = None

    def start(self):
        started = time.perf_counter()
        import_gpu_stack()
        install_launch_hook(self.launch_log)
        self.recorder_class = aten_recorder_class()
        torch.cuda.set_device(0)
        device, versions, props = describe_device()
        sys.path.append(str(self.kernel_dir))
        problem = load_module(self.kernel_dir / "problem.py", "kactors_problem")
        self.dtype = self.resolve_dtype(problem)
        tolerance = DEFAULT_TOLERANCE[str(self.dtype).replace("torch.", "")]
        self.atol = self.settings.atol if self.settings.atol is not None else tolerance
        self.rtol = self.settings.rtol if self.settings.rtol is not None else tolerance
        seeds = list(range(self.settings.seeds))
        # torch.device("cuda") as a context only around the problem's own code: set globally
        # it would add a Python function-mode hop to every torch call of every timed run.
        with torch.device("cuda"):
            torch.manual_seed(seeds[0])
            self.model = problem.Model(*problem.get_init_inputs()).to(self.dtype).eval()
            self.draws = []
            for seed in seeds:
                torch.manual_seed(seed)
                inputs = [cast_input(v, self.dtype) for v in problem.get_inputs()]
                with torch.no_grad():
                    expected = as_tensor_list(self.model(*inputs), "Model.forward")
                self.draws.append(Draw(seed, inputs, [t.detach() for t in expected]))
        l2_bytes = getattr(props, "L2_cache_size", 0) or 0
        flush_bytes = self.settings.l2_flush_bytes or max(2 * l2_bytes, MIN_L2_FLUSH_BYTES)
        self.l2_flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        self.warm_up_own_paths()
        return {
            "type": "ready",
            "device": device,
            "versions": versions,
            "dtype": str(self.dtype).replace("torch.", ""),
            "draws": len(self.draws),
            "atol": self.atol,
            "rtol": self.rtol,
            "l2_flush_bytes": flush_bytes,
            "setup_s": round(time.perf_counter() - started, 4),
        }

    def warm_up_own_paths(self):
        """The first use of the dispatch mode took 5 s on the H200 (lazy imports inside torch),
        and the comparison and events have first-use costs too: pay them here, in setup_s, not
        in the first candidate's overhead."""
        probe = torch.ones(1024, device="cuda", dtype=self.dtype)
        with torch.no_grad(), self.recorder_class(torch.cuda.current_stream().cuda_stream):
            copy = torch.empty_like(probe)
            copy.copy_(probe)
        compare(copy, probe, self.atol, self.rtol)
        checksum([copy])
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        self.l2_flush.zero_()
        end.record()
        end.synchronize()
        start.elapsed_time(end)

    def resolve_dtype(self, problem):
        # The --config dtype wins, then problem.DTYPE, then bf16 (KernelAgent's test.py default).
        if self.settings.dtype is not None:
            return getattr(torch, self.settings.dtype)
        dtype = getattr(problem, "DTYPE", None)
        if dtype is None:
            return getattr(torch, DEFAULT_DTYPE)
        if isinstance(dtype, str):
            if dtype not in DTYPE_ALIASES:
                raise EvaluatorError(
                    f"problem.py DTYPE {dtype!r} is not one of {sorted(DTYPE_ALIASES)}"
                )
            return getattr(torch, DTYPE_ALIASES[dtype])
        if str(dtype).replace("torch.", "") not in DEFAULT_TOLERANCE:
            raise EvaluatorError(f"problem.py DTYPE {dtype} is not bfloat16, float16 or float32")
        return dtype

    # -- requests -------------------------------------------------------------------------------

    def handle(self, request):
        op = request.get("op")
        if op == "verify":
            return self.verify(request)
        if op == "time":
            return self.time_candidate(request)
        if op == "time_reference":
            return self.time_reference(request)
        raise EvaluatorError(f"unknown op {op!r}; accepted: verify, time, time_reference, shutdown")

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
        module = load_module(path, name)
        function = getattr(module, "kernel_function", None)
        if not callable(function):
            raise Rejection(f"{path.name} defines no callable kernel_function")
        kwargs = bind_model_attributes(function, len(self.draws[0].inputs), self.model)
        self.candidate = Candidate(path, module, function, kwargs)
        return self.candidate

    def fresh_inputs(self, draw):
        return clone_values(draw.inputs)

    def verify(self, request):
        path = Path(request["candidate"])
        set_triton_cache_dir(Path(request["cache_dir"]))
        verdict = {
            "passed": False,
            "max_abs_err": None,
            "max_rel_err": None,
            "reason": None,
            "launched": [],
            "aten_ops": [],
            "compile_s": None,
            "run_s": None,
        }
        try:
            candidate = self.load_candidate(path)
            # Failed until proven otherwise: an exception below leaves it untimeable.
            candidate.passed = False
            self.check_candidate(candidate, verdict)
            candidate.passed = verdict["passed"] = True
        except Rejection as rejection:
            verdict["reason"] = str(rejection)
        return verdict

    def check_candidate(self, candidate, verdict):
        fn, timing_stream = candidate.function, torch.cuda.current_stream().cuda_stream
        # The first call compiles and autotunes, outside the aten recorder: Triton's autotuner
        # runs PyTorch operations of its own (cache flushes, timing) that are not the candidate's.
        inputs = self.fresh_inputs(self.draws[0])
        started = time.perf_counter()
        with self.launch_log.window(), torch.no_grad():
            result = fn(*inputs, **clone_kwargs(candidate.kwargs))
            torch.cuda.synchronize()
        verdict["compile_s"] = round(time.perf_counter() - started, 4)
        # Every buffer the candidate could hand back again is held and holds NaN from here on:
        # a reused buffer is rejected by address, and an unwritten one cannot pass as an answer.
        held = self.output_tensors(result, inputs)
        for tensor in held:
            poison(tensor)
        held_storages = {storage_of(t) for t in held}
        del result, inputs
        launched, aten_ops = [], []
        run_s = 0.0
        mutates, side_streams = False, False
        previous_sums = None
        for index, draw in enumerate(self.draws):
            inputs = self.fresh_inputs(draw)
            kwargs = clone_kwargs(candidate.kwargs)
            recorder = self.recorder_class(timing_stream)
            started = time.perf_counter()
            with self.launch_log.window() as log, torch.no_grad():
                with recorder:
                    result = fn(*inputs, **kwargs)
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
                    f"the output did not change when the inputs did (draws {index - 1} and {index})"
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
            del result, inputs, kwargs
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
                f"{len(draw.expected)} ({which})"
            )
        for position, (actual, expected) in enumerate(zip(outputs, draw.expected)):
            label = which if len(outputs) == 1 else f"{which}, output {position}"
            if actual.device.type != expected.device.type:
                raise Rejection(
                    f"output is on {actual.device}, expected {expected.device} ({label})"
                )
            if tuple(actual.shape) != tuple(expected.shape):
                raise Rejection(
                    f"output shape {tuple(actual.shape)}, expected {tuple(expected.shape)} "
                    f"({label})"
                )
            max_abs, max_rel, bad, nonfinite = compare(actual, expected, self.atol, self.rtol)
            errors["max_abs_err"] = max(errors["max_abs_err"] or 0.0, max_abs)
            errors["max_rel_err"] = max(errors["max_rel_err"] or 0.0, max_rel)
            if nonfinite:
                raise Rejection(f"output holds {nonfinite} NaN or Inf values ({label})")
            if bad:
                raise Rejection(
                    f"{bad} of {actual.numel()} output elements exceed atol={self.atol}, "
                    f"rtol={self.rtol}: max abs err {max_abs:.6g}, max rel err {max_rel:.6g} "
                    f"(output dtype {actual.dtype}, reference dtype {expected.dtype}) ({label})"
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
                return {"passed": False, "reason": str(rejection)}
            warmup = max(warmup, 1)
        elif candidate.passed is False:
            raise EvaluatorError(f"candidate {path} failed verification; it is not timed")
        return self.benchmark(
            candidate.function,
            candidate.kwargs,
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
            {},
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
        self, fn, kwargs, warmup, repeat, restore_every_call, device_wide_end, candidate_kernels
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
        call_kwargs = [clone_kwargs(kwargs) for _ in draws]
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
                    result = fn(*args, **call_kwargs[index])
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
                    return self.rejected(str(rejection))
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
    def rejected(reason):
        return {"passed": False, "reason": reason}


# ---------------------------------------------------------------------------------------------
# The protocol loop


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


def serve(evaluator, requests, channel):
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
            body = evaluator.handle(request)
            reply = {"type": "reply", "id": request_id, "ok": True, "seconds": 0.0}
            reply.update(sanitize(body))
            reply["seconds"] = round(time.perf_counter() - started, 4)
            channel.send(reply)
        except (Exception, SystemExit) as error:
            fatal = torch is not None and (
                is_poisoned_context_error(error) or not context_is_usable()
            )
            channel.send(
                {
                    "type": "reply",
                    "id": request_id,
                    "ok": False,
                    "seconds": round(time.perf_counter() - started, 4),
                    "error": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(),
                    "fatal": fatal,
                }
            )
            if fatal:
                # The context is gone: leave at once, without CUDA teardown that could hang.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(3)


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
    # Never write __pycache__ into the user's kernel directory.
    sys.dont_write_bytecode = True
    requests = os.fdopen(3, "r", encoding="utf-8")
    channel = Channel(os.fdopen(4, "w", encoding="utf-8"))
    try:
        settings = Settings(json.loads(args.config))
        evaluator = Evaluator(args.kernel_dir.resolve(), settings)
        ready = evaluator.start()
    except (Exception, SystemExit) as error:
        channel.send(
            {
                "type": "startup_failed",
                "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc(),
            }
        )
        return 2
    channel.send(sanitize(ready))
    return serve(evaluator, requests, channel)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
