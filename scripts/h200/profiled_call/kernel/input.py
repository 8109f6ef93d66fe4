"""The candidate of scripts/h200/profiled_call.sh (issue 12): weighted RMS norm whose
kernel_function takes the model's weight as a positional-only parameter and its eps by name.
Before issue 12 the evaluator refused this signature (weight "is neither one of the problem's
inputs nor an attribute of the model") and the profiled wrapper passed weight by name, which
Python refuses; kernel_call.py binds it alike for both now:
kernel_function(x, model.weight, eps=model.eps).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _weighted_rmsnorm_kernel(x_ptr, w_ptr, y_ptr, C, S, eps, BLOCK_S: tl.constexpr):
    pid_s = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    offs = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    s_ok = offs < S
    sample = n * C * S
    sum_sq = tl.zeros([BLOCK_S], dtype=tl.float32)
    for c in range(0, C):
        v = tl.load(x_ptr + sample + c * S + offs, mask=s_ok, other=0.0).to(tl.float32)
        sum_sq += v * v
    rms = tl.sqrt(sum_sq / C + eps)
    for c in range(0, C):
        v = tl.load(x_ptr + sample + c * S + offs, mask=s_ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c).to(tl.float32)
        y = (v / rms * w).to(y_ptr.dtype.element_ty)
        tl.store(y_ptr + sample + c * S + offs, y, mask=s_ok)


def kernel_function(x, weight, /, eps):
    """Weighted RMS norm of x (N, C, ...) over dim 1; a new tensor of x's shape and dtype."""
    x = x.contiguous()
    n, c = x.shape[0], x.shape[1]
    s = x.numel() // (n * c)
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    block_s = 128
    _weighted_rmsnorm_kernel[(triton.cdiv(s, block_s), n)](
        x, weight, y, c, s, float(eps), BLOCK_S=block_s, num_warps=4
    )
    return y
