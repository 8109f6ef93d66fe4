"""Standalone correctness test for optimize_02_rmsnorm, in the manner of KernelAgent's test.py.

Run from this directory: `python test.py`. It takes kernel_function from kernel.py when that file
exists (the layout KernelAgent and a finished kactors run use), else from input.py (the initial
kernel). Like KernelAgent's test it builds the inputs on the CPU, copies them to the GPU, casts
floating inputs and the model to the problem's dtype (bf16 unless problem.DTYPE says otherwise),
runs the reference and the kernel, and compares with rtol = atol = 1e-2.
Prints PASS and exits 0, or prints what went wrong and exits 1.
"""

import sys
import traceback
from pathlib import Path

import torch

from problem import Model, get_init_inputs, get_inputs
import problem

if (Path(__file__).resolve().parent / "kernel.py").exists():
    from kernel import kernel_function
else:
    from input import kernel_function

RTOL = 1e-2
ATOL = 1e-2


def _to_device(value, device, dtype):
    if isinstance(value, torch.Tensor):
        value = value.to(device)
        return value.to(dtype) if value.is_floating_point() else value
    return value


def run_test() -> bool:
    device = torch.device("cuda")
    dtype = getattr(problem, "DTYPE", torch.bfloat16)
    torch.manual_seed(0)
    model = Model(*get_init_inputs()).to(device).to(dtype)
    inputs = [_to_device(x, device, dtype) for x in get_inputs()]

    with torch.no_grad():
        expected = model(*inputs)
    # eps comes from the model and is passed by name, as kactors binds parameters named after
    # the model's attributes.
    actual = kernel_function(*inputs, eps=model.eps)
    torch.cuda.synchronize()
    if actual is None:
        # KernelAgent's in-place convention: the result is written into the first input.
        actual = inputs[0]

    if not isinstance(actual, torch.Tensor):
        print(f"FAIL: kernel_function returned {type(actual).__name__}, expected a tensor")
        return False
    if actual.shape != expected.shape:
        print(f"FAIL: output shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
        return False
    actual32 = actual.float()
    expected32 = expected.float()
    if torch.allclose(actual32, expected32, rtol=RTOL, atol=ATOL):
        print("PASS")
        return True
    max_abs = (actual32 - expected32).abs().max().item()
    print(
        f"FAIL: max abs difference {max_abs} exceeds rtol={RTOL}, atol={ATOL} "
        f"(output dtype {actual.dtype}, reference dtype {expected.dtype})"
    )
    return False


if __name__ == "__main__":
    try:
        passed = run_test()
    except Exception:
        traceback.print_exc()
        passed = False
    sys.exit(0 if passed else 1)
