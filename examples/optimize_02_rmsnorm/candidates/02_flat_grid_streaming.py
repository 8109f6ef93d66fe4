"""RMSNorm candidate 02: single pass on a flat 1-D grid, wider tiles, streaming cache hints.

Like candidate 01 each program holds all features of its positions in registers, but the tile is
(64, 256) on eight warps, halving the number of programs and doubling the bytes each one has in
flight. The grid is one-dimensional (sample and tile decoded from the program id), so
consecutive programs walk consecutive memory of one sample. x and y are touched exactly once,
so the load carries evict_first and the store .cs (streaming): neither should displace anything
useful from L2.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_flat_kernel(
    x_ptr,
    y_ptr,
    C,
    S,
    tiles_per_sample,
    eps,
    BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    pid = tl.program_id(0)
    n = (pid // tiles_per_sample).to(tl.int64)
    tile = pid % tiles_per_sample
    offs_s = tile * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_c = tl.arange(0, BLOCK_C)
    ok = (offs_c[:, None] < C) & (offs_s[None, :] < S)
    # 64-bit offsets: N * C * S can exceed 2^31 for tensors of this size.
    offs = n * C * S + offs_c[:, None].to(tl.int64) * S + offs_s[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0, eviction_policy="evict_first")
    xf = x.to(tl.float32)
    mean_sq = tl.sum(xf * xf, axis=0) / C
    inv_rms = tl.math.rsqrt(mean_sq + eps)
    tl.store(
        y_ptr + offs,
        (xf * inv_rms[None, :]).to(y_ptr.dtype.element_ty),
        mask=ok,
        cache_modifier=".cs",
    )


def kernel_function(x, eps=1e-5):
    """RMS norm of x (shape (N, C, ...)) over dim 1; returns a new tensor of x's shape and dtype."""
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (N, C, ...), got {tuple(x.shape)}")
    x = x.contiguous()
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C) if N * C > 0 else 0
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    BLOCK_S = 256
    tiles_per_sample = triton.cdiv(S, BLOCK_S)
    _rmsnorm_flat_kernel[(N * tiles_per_sample,)](
        x,
        y,
        C,
        S,
        tiles_per_sample,
        float(eps),
        BLOCK_C=triton.next_power_of_2(C),
        BLOCK_S=BLOCK_S,
        num_warps=8,
    )
    return y
