#!/usr/bin/env python3
"""The process kactors profiles (under ncu or rocprofv3): exactly one measured kernel_function call.

    profile_wrapper.py --kernel-dir DIR --candidate PATH --kernels-out FILE --config JSON

It imports the candidate, builds the problem's inputs on the device, calls kernel_function a few
times to warm up (Triton compiles and autotunes here), synchronizes, then makes one measured
call between torch.cuda.profiler.start() and stop(), synchronizing inside the marks so the
measured call's kernels all run between them. ncu runs with --profile-from-start off and sees
only that call. On ROCm the marks do nothing; rocprofv3 traces everything and kactors selects
the measured call's dispatches, which are the process's last ones: nothing runs on the GPU
after the measured call.

Triton's launch hook records the names of the Triton kernels the measured call launched; they
are written as a JSON list to --kernels-out, and are the kernels under test (never PyTorch's
at:: kernels, never runtime helpers): kactors filters the profile by them.

--config keys (all optional): dtype (bf16/bfloat16, fp16/float16, fp32/float32; default
problem.DTYPE, else bfloat16), seed (default 0), warmup_calls (default 3), triton_cache_dir (the
candidate's Triton cache, so the warm-up finds its compiled kernels).
Exits 0 only when the measured call ran and launched at least one Triton kernel; otherwise
prints what went wrong to stderr and exits 1.
"""

import argparse
import importlib.util
import inspect
import json
import os
import sys
import traceback
from pathlib import Path

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
CONFIG_KEYS = {"dtype", "seed", "warmup_calls", "triton_cache_dir"}


class WrapperError(Exception):
    pass


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise WrapperError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def read_config(text):
    config = json.loads(text)
    if not isinstance(config, dict):
        raise WrapperError("--config must be a JSON object")
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise WrapperError(f"unknown --config keys {unknown}; accepted: {sorted(CONFIG_KEYS)}")
    dtype = config.get("dtype")
    if dtype is not None and dtype not in DTYPE_ALIASES:
        raise WrapperError(f"--config dtype {dtype!r} is not one of {sorted(DTYPE_ALIASES)}")
    for key, default, minimum in (("seed", 0, 0), ("warmup_calls", 3, 1)):
        value = config.setdefault(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise WrapperError(f"--config {key} must be a whole number >= {minimum}, got {value!r}")
    return config


def resolve_dtype(torch, config, problem):
    # The same order as the evaluator: --config, then problem.DTYPE, then bfloat16.
    if config.get("dtype") is not None:
        return getattr(torch, DTYPE_ALIASES[config["dtype"]])
    dtype = getattr(problem, "DTYPE", None)
    if dtype is None:
        return torch.bfloat16
    if isinstance(dtype, str):
        return getattr(torch, DTYPE_ALIASES[dtype])
    return dtype


def model_attribute_kwargs(function, input_count, model):
    """kernel_function's parameters beyond the inputs, named after model attributes."""
    parameters = inspect.signature(function).parameters.values()
    positional, takes_varargs, kwargs = 0, False, {}
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
        for module in model.modules():
            if not p.name.startswith("_") and (
                p.name in module.__dict__
                or p.name in module._parameters
                or p.name in module._buffers
            ):
                kwargs[p.name] = getattr(module, p.name)
                break
        else:
            if p.default is p.empty:
                raise WrapperError(
                    f"kernel_function parameter {p.name!r} is neither an input nor a model "
                    "attribute"
                )
    return kwargs


def install_launch_hook(triton, hook):
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is None:
        from triton.compiler import CompiledKernel

        CompiledKernel.launch_enter_hook = hook
    elif hasattr(runtime.launch_enter_hook, "add"):
        runtime.launch_enter_hook.add(hook)
    else:
        runtime.launch_enter_hook = hook


def profile(args, config):
    if config.get("triton_cache_dir"):
        os.environ["TRITON_CACHE_DIR"] = config["triton_cache_dir"]
    import torch
    import triton

    cache_knobs = getattr(getattr(triton, "knobs", None), "cache", None)
    if config.get("triton_cache_dir") and cache_knobs is not None:
        cache_knobs.dir = config["triton_cache_dir"]
    measured = []
    recording = [False]

    def on_launch(metadata):
        if recording[0]:
            data = getattr(metadata, "data", metadata)
            measured.append(str(data.get("name")) if isinstance(data, dict) else repr(metadata))

    install_launch_hook(triton, on_launch)
    torch.cuda.set_device(0)
    kernel_dir = args.kernel_dir.resolve()
    sys.path.append(str(kernel_dir))
    problem = load_module(kernel_dir / "problem.py", "kactors_problem")
    candidate = load_module(args.candidate.resolve(), "kactors_candidate")
    function = getattr(candidate, "kernel_function", None)
    if not callable(function):
        raise WrapperError(f"{args.candidate} defines no callable kernel_function")
    dtype = resolve_dtype(torch, config, problem)
    with torch.device("cuda"):
        torch.manual_seed(config["seed"])
        model = problem.Model(*problem.get_init_inputs()).to(dtype).eval()
        inputs = [
            v.to(dtype) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
            for v in problem.get_inputs()
        ]
    kwargs = model_attribute_kwargs(function, len(inputs), model)

    def fresh():
        # Each call gets its own copy: an in-place kernel must not profile on its own output.
        return [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]

    with torch.no_grad():
        for _ in range(config["warmup_calls"]):
            function(*fresh(), **kwargs)
        measured_inputs = fresh()
        torch.cuda.synchronize()
        recording[0] = True
        marks = torch.version.hip is None
        if marks:
            torch.cuda.profiler.start()
        function(*measured_inputs, **kwargs)
        torch.cuda.synchronize()
        if marks:
            torch.cuda.profiler.stop()
        recording[0] = False
    names = list(dict.fromkeys(measured))
    if not names:
        raise WrapperError("the measured kernel_function call launched no Triton kernel")
    args.kernels_out.write_text(json.dumps(names) + "\n", encoding="utf-8")
    print(f"profile_wrapper: measured call launched {names}", file=sys.stderr)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel-dir", type=Path, required=True)
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--kernels-out", type=Path, required=True)
    parser.add_argument("--config", default="{}")
    args = parser.parse_args(argv)
    # Never write __pycache__ into the user's kernel directory.
    sys.dont_write_bytecode = True
    try:
        profile(args, read_config(args.config))
    except Exception as error:
        traceback.print_exc()
        print(f"profile_wrapper: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
