"""Issue 23 part 2, the option "one warm profiling process per device": a process started once
under `ncu --profile-from-start off`, which profiles several kernels one after another, each only
in its measured call (torch.cuda.profiler.start/stop around it), as profile_wrapper.py does for
one. Run by profile_options.py under ncu; prints one JSON line per kernel:
{"candidate", "load_s", "warmup_s", "profiled_s"}, and first {"start_s"} (torch, Triton and the
CUDA context, once for the process).

    warm_profiler.py KERNEL_DIR CANDIDATE.py [CANDIDATE.py ...]

It reuses templates/kernel_call.py (the evaluator's and profile_wrapper's way of building the
problem and calling kernel_function), found beside profile_wrapper.py in templates/.
"""

import json
import os
import sys
import time
from pathlib import Path

STARTED = time.monotonic()
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "templates"))
import kernel_call  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

torch.cuda.set_device(0)
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
print(json.dumps({"start_s": round(time.monotonic() - STARTED, 3)}), flush=True)

kernel_dir = Path(sys.argv[1]).resolve()
sys.path.append(str(kernel_dir))
problem = kernel_call.load_module(kernel_dir / "problem.py", "kactors_problem")
dtype = kernel_call.resolve_dtype(torch, None, problem)
launches = kernel_call.LaunchLog()
kernel_call.install_launch_hook(triton, launches)
for index, path in enumerate(sys.argv[2:]):
    began = time.monotonic()
    candidate = kernel_call.load_module(Path(path).resolve(), f"kactors_candidate_{index}")
    function = kernel_call.kernel_function_of(candidate, Path(path))
    with torch.device("cuda"):
        model = kernel_call.build_model(torch, problem, dtype, 0)
        inputs = kernel_call.draw_inputs(torch, problem, dtype, 0)
    binding = kernel_call.bind(function, len(inputs), model)
    loaded = time.monotonic()
    with torch.no_grad():
        for _ in range(3):
            call_args, call_kwargs = binding.arguments([kernel_call.fresh_copy(v) for v in inputs])
            function(*call_args, **call_kwargs)
        call_args, call_kwargs = binding.arguments([kernel_call.fresh_copy(v) for v in inputs])
        torch.cuda.synchronize()
        warm = time.monotonic()
        with launches.window():
            torch.cuda.profiler.start()
            function(*call_args, **call_kwargs)
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        done = time.monotonic()
    print(
        json.dumps(
            {
                "candidate": os.path.basename(path),
                "kernels": sorted(set(launches.names)),
                "load_s": round(loaded - began, 3),
                "warmup_s": round(warm - loaded, 3),
                "profiled_s": round(done - warm, 3),
            }
        ),
        flush=True,
    )
