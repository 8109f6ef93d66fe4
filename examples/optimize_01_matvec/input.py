"""Initial kernel for optimize_01_matvec: blocks of 64 rows, one Triton program per block.

Correct but untuned, the shape a first attempt often takes: each program owns BLOCK_M = 64 rows
of A, walks them in chunks of BLOCK_K = 128 columns, multiplies each chunk by the matching chunk
of B, reduces it into a per-row fp32 accumulator and finally writes its 64 elements of C. With
M = 2048 that is only 32 programs for the H200's 132 SMs, so most of the GPU sits idle while the
busy SMs each stream 128 MiB of A; the memory bandwidth this kernel is bound by stays far away.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _matvec_row_block_kernel(
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
    # A holds 2^31 elements: row offsets must be computed in 64 bits.
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None] * stride_am
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + cols
        k_ok = k < K
        a = tl.load(
            a_rows + k[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0)
        acc += tl.sum(a.to(tl.float32) * b.to(tl.float32)[None, :], axis=1)
    tl.store(c_ptr + rows * stride_cm, acc.to(c_ptr.dtype.element_ty), mask=row_ok)


def kernel_function(A, B):
    """C = A @ B with A of shape (M, K) and B of shape (K, 1); C has A's dtype."""
    if A.ndim != 2 or B.ndim != 2 or B.shape[1] != 1 or A.shape[1] != B.shape[0]:
        raise ValueError(
            f"expected A of shape (M, K) and B of shape (K, 1), got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    if A.dtype != B.dtype:
        raise ValueError(f"A and B must share a dtype, got {A.dtype} and {B.dtype}")
    M, K = A.shape
    C = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    BLOCK_M = 64
    _matvec_row_block_kernel[(triton.cdiv(M, BLOCK_M),)](
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
        BLOCK_K=128,
        num_warps=4,
    )
    return C
