"""RMSNorm candidate 90: DELIBERATELY WRONG. Divides by the root of the sum, not of the mean.

Candidate 01's single-pass tile kernel with the division by the feature count left out: it
computes x / sqrt(sum(x^2) + eps) instead of x / sqrt(mean(x^2) + eps). It runs cleanly and
returns a tensor of the right shape and dtype, but every value is sqrt(64) = 8 times too small
(about 0.9 off on values near 1, where bf16 tolerance allows about 0.02). (Forgetting eps instead
would not do: with mean(x^2) near 1/3, an eps of 1e-5 changes nothing at bf16 precision.) It
exists so that verification has a plausible-looking wrong answer to reject.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_tile_kernel(
    x_ptr,
    y_ptr,
    C,
    S,
    eps,
    BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    pid_s = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_c = tl.arange(0, BLOCK_C)
    ok = (offs_c[:, None] < C) & (offs_s[None, :] < S)
    offs = n * C * S + offs_c[:, None].to(tl.int64) * S + offs_s[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    # The bug: the sum of squares is never divided by C.
    sum_sq = tl.sum(x * x, axis=0)
    inv_rms = tl.math.rsqrt(sum_sq + eps)
    tl.store(y_ptr + offs, (x * inv_rms[None, :]).to(y_ptr.dtype.element_ty), mask=ok)


def kernel_function(x, eps=1e-5):
    """Meant to be RMS norm over dim 1; scales by the wrong factor (see the module docstring)."""
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (N, C, ...), got {tuple(x.shape)}")
    x = x.contiguous()
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C) if N * C > 0 else 0
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    BLOCK_S = 128
    _rmsnorm_tile_kernel[(triton.cdiv(S, BLOCK_S), N)](
        x,
        y,
        C,
        S,
        float(eps),
        BLOCK_C=triton.next_power_of_2(C),
        BLOCK_S=BLOCK_S,
        num_warps=4,
    )
    return y
