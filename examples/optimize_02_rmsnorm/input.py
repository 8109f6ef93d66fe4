"""Initial kernel for optimize_02_rmsnorm: two passes over the features, one spatial tile each.

Correct but untuned: x is seen as (N, C, S) with S the flattened trailing dimensions. Program
(t, n) owns BLOCK_S = 128 contiguous positions of sample n; it loops over the C features once to
sum squares (fp32), computes rms = sqrt(sum / C + eps), then loops over the features again,
re-reading x, to write x / rms. The second read of every element is the cost to optimize away.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_two_pass_kernel(
    x_ptr,
    y_ptr,
    C,
    S,
    eps,
    BLOCK_S: tl.constexpr,
):
    pid_s = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    offs = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    s_ok = offs < S
    # 64-bit sample offset: N * C * S can exceed 2^31 for tensors of this size.
    sample = n * C * S
    x_row = x_ptr + sample + offs
    y_row = y_ptr + sample + offs
    sum_sq = tl.zeros([BLOCK_S], dtype=tl.float32)
    for c in range(0, C):
        v = tl.load(x_row + c * S, mask=s_ok, other=0.0).to(tl.float32)
        sum_sq += v * v
    rms = tl.sqrt(sum_sq / C + eps)
    for c in range(0, C):
        v = tl.load(x_row + c * S, mask=s_ok, other=0.0).to(tl.float32)
        tl.store(y_row + c * S, (v / rms).to(y_ptr.dtype.element_ty), mask=s_ok)


def kernel_function(x, eps=1e-5):
    """RMS norm of x (shape (N, C, ...)) over dim 1; returns a new tensor of x's shape and dtype."""
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (N, C, ...), got {tuple(x.shape)}")
    x = x.contiguous()
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C) if N * C > 0 else 0
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    BLOCK_S = 128
    _rmsnorm_two_pass_kernel[(triton.cdiv(S, BLOCK_S), N)](
        x,
        y,
        C,
        S,
        float(eps),
        BLOCK_S=BLOCK_S,
        num_warps=4,
    )
    return y
