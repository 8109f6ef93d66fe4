"""How kactors calls a candidate's kernel_function: one module for the evaluator
(evaluator.py, which verifies and times) and the profiled process (profile_wrapper.py), which
both import it from their own folder (a run's tools/), so that a candidate is profiled with
exactly the arguments it was verified with.

- load_module: a candidate or problem.py as a fresh module from its own file.
- LaunchLog and install_launch_hook: the names (and streams) of the Triton kernels a call
  launched, through Triton's launch-enter hook, chained with any hook already there.
- resolve_dtype, build_model, draw_inputs: the problem's model and one seeded draw of its
  inputs, floating tensors cast to the dtype.
- bind: kernel_function's parameters after the problem's inputs, taken from the model's
  attributes (KernelAgent's convention: kernel_function(*inputs, weight=..., eps=...)).
- record_call: what one call's parameters were bound to, appended to the file named by
  KACTORS_KERNEL_CALL_RECORD, for the test that compares the verified and the profiled call
  (scripts/h200/profiled_call.sh); kactors never sets it.

It imports neither torch nor Triton: the parts that need no GPU are tested with plain python3
(tests/python/test_kernel_call.py).
"""

import contextlib
import ctypes
import hashlib
import importlib.util
import inspect
import json
import linecache
import os
import sys

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
# KernelAgent's test.py default.
DEFAULT_DTYPE = "bfloat16"
# Test-only: the file each recorded call is appended to (see record_call).
RECORD_VARIABLE = "KACTORS_KERNEL_CALL_RECORD"


class CallError(Exception):
    """A candidate or a problem that kactors cannot call as it calls every other: the message
    says what is wrong and what would be accepted."""


def load_module(path, name):
    """The file at `path` as a fresh module named `name` (registered in sys.modules while it
    is loaded; removed again when it raises)."""
    linecache.checkcache(str(path))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CallError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def kernel_function_of(module, path):
    function = getattr(module, "kernel_function", None)
    if not callable(function):
        raise CallError(f"{path.name} defines no callable kernel_function")
    return function


class LaunchLog:
    """Triton's launch-enter hook: the names and streams of the launches made while active.

    Installed once; every launch of every @triton.jit kernel goes through it. Launches outside
    an active window cost one attribute test.
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


def install_launch_hook(triton, hook):
    """Adds `hook` to Triton's launch-enter hooks, keeping any hook already installed."""
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
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


def resolve_dtype(torch, configured, problem):
    """The dtype of a run: `configured` (an alias of DTYPE_ALIASES) when given, then the
    problem's DTYPE (a torch dtype or an alias), then bfloat16."""
    if configured is not None:
        if configured not in DTYPE_ALIASES:
            raise CallError(f"dtype {configured!r} is not one of {sorted(DTYPE_ALIASES)}")
        return getattr(torch, DTYPE_ALIASES[configured])
    dtype = getattr(problem, "DTYPE", None)
    if dtype is None:
        return getattr(torch, DEFAULT_DTYPE)
    if isinstance(dtype, str):
        if dtype not in DTYPE_ALIASES:
            raise CallError(f"problem.py DTYPE {dtype!r} is not one of {sorted(DTYPE_ALIASES)}")
        return getattr(torch, DTYPE_ALIASES[dtype])
    if str(dtype).replace("torch.", "") not in set(DTYPE_ALIASES.values()):
        raise CallError(f"problem.py DTYPE {dtype} is not bfloat16, float16 or float32")
    return dtype


def build_model(torch, problem, dtype, seed):
    """The problem's Model, seeded with `seed`, cast to `dtype`, in eval mode (on torch's
    current default device: the callers build it under `torch.device("cuda")`)."""
    torch.manual_seed(seed)
    return problem.Model(*problem.get_init_inputs()).to(dtype).eval()


def draw_inputs(torch, problem, dtype, seed):
    """One draw of the problem's inputs, seeded with `seed`, floating tensors cast to `dtype`."""
    torch.manual_seed(seed)
    return [
        value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
        for value in problem.get_inputs()
    ]


def model_attribute(model, name):
    """(found, value): the attribute `name` of the model or, failing that, of its first
    submodule that has one (a plain attribute, a parameter or a buffer)."""
    for module in model.modules():
        if name in module.__dict__ or name in module._parameters or name in module._buffers:
            return True, getattr(module, name)
    return False, None


def fresh_copy(value):
    """A call argument as one call gets it: a tensor detached and copied, anything else as it
    is."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value


class Binding:
    """kernel_function's arguments after the problem's inputs: `positional` (name, value) pairs,
    passed by position right after the inputs (positional-only parameters), then `keywords`
    (name, value) pairs, passed by name."""

    def __init__(self, positional, keywords):
        self.positional = positional
        self.keywords = keywords

    def arguments(self, inputs):
        """(args, kwargs) of one call on `inputs` (which the caller copies as it needs), each
        bound value a fresh copy, so that no call sees what an earlier one wrote."""
        args = list(inputs) + [fresh_copy(value) for _, value in self.positional]
        kwargs = {name: fresh_copy(value) for name, value in self.keywords}
        return args, kwargs


def bind(function, input_count, model):
    """How kernel_function takes its arguments besides the problem's `input_count` inputs.

    The first `input_count` positional parameters (or *args) take the inputs. Every later
    parameter is taken from the model's attribute of its name (names starting with `_` never
    are): by position when it is positional-only (an earlier positional-only parameter without
    an attribute then gets its default, so that the positions line up), by name otherwise. A
    parameter with neither an attribute nor a default, or fewer positional parameters than
    inputs, is refused.
    """
    positional, keywords, defaults_waiting = [], [], []
    inputs_taken, takes_varargs = 0, False
    for p in inspect.signature(function).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            takes_varargs = True
            continue
        if p.kind is p.VAR_KEYWORD:
            continue
        if (
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and inputs_taken < input_count
            and not takes_varargs
        ):
            inputs_taken += 1
            continue
        found, value = (False, None) if p.name.startswith("_") else model_attribute(model, p.name)
        if not found and p.default is p.empty:
            raise CallError(
                f"kernel_function parameter {p.name!r} is neither one of the problem's "
                f"{input_count} inputs nor an attribute of the model"
            )
        if p.kind is p.POSITIONAL_ONLY:
            if found:
                positional.extend(defaults_waiting)
                defaults_waiting = []
                positional.append((p.name, value))
            else:
                defaults_waiting.append((p.name, p.default))
        elif found:
            keywords.append((p.name, value))
    if inputs_taken < input_count and not takes_varargs:
        raise CallError(
            f"kernel_function takes {inputs_taken} positional parameters, the problem has "
            f"{input_count} inputs"
        )
    return Binding(positional, keywords)


def describe_value(value):
    """What a call argument is, as JSON-ready data that is equal for equal arguments in two
    processes: a tensor by class, dtype, shape, strides, device, requires_grad and a SHA-256
    of its bytes; a number, string, bool or None by its repr; a sequence or mapping item by
    item; anything else by its type alone."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        host = value.detach().to("cpu").contiguous()
        size = host.numel() * host.element_size()
        data = ctypes.string_at(host.data_ptr(), size) if size else b""
        return {
            "tensor": type(value).__name__,
            "dtype": str(value.dtype),
            "shape": list(value.shape),
            "stride": list(value.stride()),
            "device": str(value.device),
            "requires_grad": bool(value.requires_grad),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"type": type(value).__name__, "repr": repr(value)}
    if isinstance(value, (list, tuple)):
        return {"type": type(value).__name__, "items": [describe_value(item) for item in value]}
    if isinstance(value, dict):
        return {
            "type": "dict",
            "items": {str(key): describe_value(item) for key, item in value.items()},
        }
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


def describe_call(function, args, kwargs):
    """[{"parameter", "value"}] for each parameter of `function` a call with `args` and
    `kwargs` binds, in the signature's order, as Python itself binds them."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    return [
        {"parameter": name, "value": describe_value(value)}
        for name, value in bound.arguments.items()
    ]


def record_call(side, candidate, function, args, kwargs):
    """When KACTORS_KERNEL_CALL_RECORD names a file, appends one JSON line to it: `side` (who
    calls), the candidate's path and the SHA-256 of its source, and describe_call's list."""
    path = os.environ.get(RECORD_VARIABLE)
    if not path:
        return
    with open(candidate, "rb") as source:
        source_sha256 = hashlib.sha256(source.read()).hexdigest()
    line = json.dumps(
        {
            "side": side,
            "candidate": str(candidate),
            "source_sha256": source_sha256,
            "arguments": describe_call(function, args, kwargs),
        }
    )
    # One write of the whole line to a file opened for appending: lines of several processes
    # never interleave.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))
    finally:
        os.close(fd)
