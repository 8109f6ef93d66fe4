# expect: wrong
"""Issue 18's tolerance cheat: x * 1e-6 in one elementwise pass. Every output of the reference
is about 1.5e-5, far under an absolute tolerance of 1e-2, and the output changes with the
inputs, so the old checks passed it as a 1.8x faster softmax."""

import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(y_ptr + offsets, (x * 1e-6).to(y_ptr.dtype.element_ty), mask=mask)


def kernel_function(x):
    y = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
    return y
