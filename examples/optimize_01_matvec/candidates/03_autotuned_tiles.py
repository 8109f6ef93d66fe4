"""Matvec candidate 03: the 2-D row-tile kernel under @triton.autotune.

Rather than guess one tile shape, the autotuner times each configuration below once per (M, K)
on the real inputs and keeps the fastest: rows per program (BLOCK_M), columns per loop trip
(BLOCK_K), warps per program and software-pipelining depth (num_stages). On a bandwidth-bound
matvec the best point trades bytes in flight per SM against register pressure, and where it lies
differs between GPUs. The kernel is deterministic and writes only C, so re-running it while tuning
is harmless.
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 1, "BLOCK_K": 4096}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 2, "BLOCK_K": 2048}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 4, "BLOCK_K": 1024}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 4, "BLOCK_K": 2048}, num_warps=8, num_stages=2),
        triton.Config({"BLOCK_M": 8, "BLOCK_K": 1024}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 16, "BLOCK_K": 512}, num_warps=8, num_stages=3),
    ],
    key=["M", "K"],
)
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

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]),)

    _matvec_tile_kernel[grid](
        A,
        B,
        C,
        M,
        K,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        C.stride(0),
    )
    return C
