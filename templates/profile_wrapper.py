#!/usr/bin/env python3
"""The process kactors profiles (under ncu or rocprofv3): exactly one measured kernel_function call.

    profile_wrapper.py --kernel-dir DIR --candidate PATH --kernels-out FILE --config JSON

It imports the candidate, builds the problem's model and inputs on the device (each seeded with
`seed`: with kactors' 0, the model and the inputs of the evaluator's first draw) and binds
kernel_function's parameters as the evaluator does (kernel_call.py, beside this file: both call
a candidate through it), calls kernel_function a few times to warm up (Triton compiles and
autotunes here), synchronizes, then makes one measured call between torch.cuda.profiler.start()
and stop(), synchronizing inside the marks so the measured call's kernels all run between them. ncu runs with --profile-from-start off and sees
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
import json
import os
import sys
import traceback
from pathlib import Path

# kernel_call.py lies beside this file (a run's tools/): the evaluator imports it too, so the
# measured call gets the arguments the verified call got. Nothing here writes __pycache__.
sys.dont_write_bytecode = True
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_call  # noqa: E402

CONFIG_KEYS = {"dtype", "seed", "warmup_calls", "triton_cache_dir"}


class WrapperError(Exception):
    pass


def read_config(text):
    config = json.loads(text)
    if not isinstance(config, dict):
        raise WrapperError("--config must be a JSON object")
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise WrapperError(f"unknown --config keys {unknown}; accepted: {sorted(CONFIG_KEYS)}")
    dtype = config.get("dtype")
    if dtype is not None and dtype not in kernel_call.DTYPE_ALIASES:
        raise WrapperError(
            f"--config dtype {dtype!r} is not one of {sorted(kernel_call.DTYPE_ALIASES)}"
        )
    for key, default, minimum in (("seed", 0, 0), ("warmup_calls", 3, 1)):
        value = config.setdefault(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise WrapperError(f"--config {key} must be a whole number >= {minimum}, got {value!r}")
    return config


def profile(args, config):
    if config.get("triton_cache_dir"):
        os.environ["TRITON_CACHE_DIR"] = config["triton_cache_dir"]
    import torch
    import triton

    cache_knobs = getattr(getattr(triton, "knobs", None), "cache", None)
    if config.get("triton_cache_dir") and cache_knobs is not None:
        cache_knobs.dir = config["triton_cache_dir"]
    launches = kernel_call.LaunchLog()
    kernel_call.install_launch_hook(triton, launches)
    torch.cuda.set_device(0)
    kernel_dir = args.kernel_dir.resolve()
    sys.path.append(str(kernel_dir))
    problem = kernel_call.load_module(kernel_dir / "problem.py", "kactors_problem")
    candidate = kernel_call.load_module(args.candidate.resolve(), "kactors_candidate")
    function = kernel_call.kernel_function_of(candidate, args.candidate)
    dtype = kernel_call.resolve_dtype(torch, config.get("dtype"), problem)
    # The model and the inputs of the evaluator's first draw, when seed is 0 as kactors sets it.
    with torch.device("cuda"):
        model = kernel_call.build_model(torch, problem, dtype, config["seed"])
        inputs = kernel_call.draw_inputs(torch, problem, dtype, config["seed"])
    binding = kernel_call.bind(function, len(inputs), model)

    def fresh():
        # Each call gets its own copies, as in the evaluator: an in-place kernel must not
        # profile on its own output, nor on arguments an earlier call changed.
        return binding.arguments([kernel_call.fresh_copy(value) for value in inputs])

    with torch.no_grad():
        for _ in range(config["warmup_calls"]):
            call_args, call_kwargs = fresh()
            function(*call_args, **call_kwargs)
        call_args, call_kwargs = fresh()
        kernel_call.record_call(
            "profile_wrapper", args.candidate.resolve(), function, call_args, call_kwargs
        )
        torch.cuda.synchronize()
        marks = torch.version.hip is None
        with launches.window():
            if marks:
                torch.cuda.profiler.start()
            function(*call_args, **call_kwargs)
            torch.cuda.synchronize()
            if marks:
                torch.cuda.profiler.stop()
    names = list(dict.fromkeys(launches.names))
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
    try:
        profile(args, read_config(args.config))
    except Exception as error:
        traceback.print_exc()
        print(f"profile_wrapper: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
