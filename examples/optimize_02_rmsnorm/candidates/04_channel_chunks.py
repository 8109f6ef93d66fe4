"""RMSNorm candidate 04: wide spatial tiles, features in chunks, second pass served from L2.

Each program owns BLOCK_S = 1024 positions, four times candidate 01's, and walks the features in
chunks of CHUNK_C = 16, so only a (16, 1024) slice is live in registers at any time: wide,
fully coalesced 2 KiB rows per feature without spilling. The sum of squares is accumulated over
the chunks; a second walk re-reads the same 128 KiB of x, which was just loaded and is expected
to still be in the 50 MiB L2, and writes the scaled values. The bet: wider rows and fewer
programs win more than the L2 re-read costs.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_chunked_kernel(
    x_ptr,
    y_ptr,
    C,
    S,
    eps,
    CHUNK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    pid_s = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    s_ok = offs_s < S
    chunk = tl.arange(0, CHUNK_C)
    # 64-bit offsets: N * C * S can exceed 2^31 for tensors of this size.
    sample = n * C * S
    sum_sq = tl.zeros([BLOCK_S], dtype=tl.float32)
    for c0 in range(0, C, CHUNK_C):
        offs_c = c0 + chunk
        ok = (offs_c[:, None] < C) & s_ok[None, :]
        offs = sample + offs_c[:, None].to(tl.int64) * S + offs_s[None, :]
        v = tl.load(x_ptr + offs, mask=ok, other=0.0).to(tl.float32)
        sum_sq += tl.sum(v * v, axis=0)
    inv_rms = tl.math.rsqrt(sum_sq / C + eps)
    for c0 in range(0, C, CHUNK_C):
        offs_c = c0 + chunk
        ok = (offs_c[:, None] < C) & s_ok[None, :]
        offs = sample + offs_c[:, None].to(tl.int64) * S + offs_s[None, :]
        v = tl.load(x_ptr + offs, mask=ok, other=0.0, eviction_policy="evict_first")
        out = v.to(tl.float32) * inv_rms[None, :]
        tl.store(y_ptr + offs, out.to(y_ptr.dtype.element_ty), mask=ok)


def kernel_function(x, eps=1e-5):
    """RMS norm of x (shape (N, C, ...)) over dim 1; returns a new tensor of x's shape and dtype."""
    if x.ndim < 2:
        raise ValueError(f"expected x of shape (N, C, ...), got {tuple(x.shape)}")
    x = x.contiguous()
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C) if N * C > 0 else 0
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    BLOCK_S = 1024
    _rmsnorm_chunked_kernel[(triton.cdiv(S, BLOCK_S), N)](
        x,
        y,
        C,
        S,
        float(eps),
        CHUNK_C=16,
        BLOCK_S=BLOCK_S,
        num_warps=8,
    )
    return y
