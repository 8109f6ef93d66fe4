# expect: passed
"""Matvec candidate 01: 2-D tiles of BLOCK_M rows by BLOCK_K columns, eight warps.

Each program owns BLOCK_M = 4 rows of A and streams them in chunks of BLOCK_K = 2048 columns, so
one load of B serves four rows and each thread issues wide (16-byte) loads of A. Where the initial
kernel runs 32 programs of 64 rows and leaves most SMs idle, this one runs 512 programs that
occupy every SM, each keeping 16 KiB of A in flight per loop trip on this bandwidth-bound problem.
Partial products stay in a (BLOCK_M, BLOCK_K) fp32 accumulator and are reduced once at the end.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _matvec_tile_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_cm,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid = tl.program_id(0)
    # 64-bit row indices: row * stride_am reaches 2^31 in A.
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None] * stride_am
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + cols
        k_ok = k < K
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0).to(tl.float32)
        a = tl.load(
            a_rows + k[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        acc += a.to(tl.float32) * b[None, :]
    out = tl.sum(acc, axis=1)
    tl.store(c_ptr + rows * stride_cm, out.to(c_ptr.dtype.element_ty), mask=row_ok)


def kernel_function(A, B):
    """C = A @ B with A of shape (M, K) and B of shape (K, 1); C has A's dtype."""
    if A.ndim != 2 or B.ndim != 2 or B.shape[1] != 1 or A.shape[1] != B.shape[0]:
        raise ValueError(
            f"expected A of shape (M, K) and B of shape (K, 1), got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    M, K = A.shape
    C = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    BLOCK_M = 4
    _matvec_tile_kernel[(triton.cdiv(M, BLOCK_M),)](
        A,
        B,
        C,
        M,
        K,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        C.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_K=2048,
        num_warps=8,
    )
    return C
