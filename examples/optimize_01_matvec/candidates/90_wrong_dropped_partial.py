"""Matvec candidate 90: DELIBERATELY WRONG. Split-K whose reduce kernel drops one partial sum.

Same split-K scheme as candidate 02 (SPLIT_K = 4 slices of K, fp32 partials in a scratch buffer,
a second kernel summing them), but the reduce loop starts at slice 1, an off-by-one that silently
skips the partial dot products of the first quarter of K. The kernel runs cleanly and returns a
tensor of the right shape and dtype; every element is about 25% too small (about 65 000 off on
values near 262 000, where bf16 tolerance allows about 2 600). It exists so that verification has
a plausible-looking wrong answer to reject.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _matvec_partial_kernel(
    a_ptr,
    b_ptr,
    part_ptr,
    M,
    K,
    K_PER_SPLIT,
    stride_am,
    stride_ak,
    stride_bk,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    k_begin = pid_k * K_PER_SPLIT
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    a_rows = a_ptr + rows[:, None] * stride_am
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        k = k0 + cols
        k_ok = k < k_end
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0).to(tl.float32)
        a = tl.load(
            a_rows + k[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        acc += a.to(tl.float32) * b[None, :]
    partial = tl.sum(acc, axis=1)
    tl.store(part_ptr + pid_k.to(tl.int64) * M + rows, partial, mask=row_ok)


@triton.jit
def _sum_partials_kernel(
    part_ptr,
    c_ptr,
    M,
    stride_cm,
    SPLIT_K: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    total = tl.zeros([BLOCK_M], dtype=tl.float32)
    # The bug: slice 0 is never added.
    for s in range(1, SPLIT_K):
        total += tl.load(part_ptr + s * M + rows, mask=row_ok, other=0.0)
    tl.store(c_ptr + rows * stride_cm, total.to(c_ptr.dtype.element_ty), mask=row_ok)


def kernel_function(A, B):
    """Meant to compute C = A @ B; leaves out the first quarter of K (see the module docstring)."""
    if A.ndim != 2 or B.ndim != 2 or B.shape[1] != 1 or A.shape[1] != B.shape[0]:
        raise ValueError(
            f"expected A of shape (M, K) and B of shape (K, 1), got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    M, K = A.shape
    SPLIT_K = 4
    BLOCK_M = 8
    BLOCK_K = 1024
    k_per_split = triton.cdiv(triton.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    partials = torch.empty((SPLIT_K, M), device=A.device, dtype=torch.float32)
    C = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    _matvec_partial_kernel[(triton.cdiv(M, BLOCK_M), SPLIT_K)](
        A,
        B,
        partials,
        M,
        K,
        k_per_split,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_K=BLOCK_K,
        num_warps=8,
    )
    REDUCE_BLOCK_M = 128
    _sum_partials_kernel[(triton.cdiv(M, REDUCE_BLOCK_M),)](
        partials,
        C,
        M,
        C.stride(0),
        SPLIT_K=SPLIT_K,
        BLOCK_M=REDUCE_BLOCK_M,
        num_warps=4,
    )
    return C
