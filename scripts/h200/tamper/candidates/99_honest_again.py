# expect: passed
"""The honest matvec again, proposed after the tampering kernels: its source differs from
00_honest.py only in this docstring (a string, so a token: comments alone would make it a
duplicate of 00, which kactors evaluates once).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _matvec_pipelined_kernel(
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
    NUM_STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None] * stride_am
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES):
        k = k0 + cols
        k_ok = k < K
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0, eviction_policy="evict_last")
        a = tl.load(
            a_rows + k[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
            eviction_policy="evict_first",
        )
        acc += a.to(tl.float32) * b.to(tl.float32)[None, :]
    out = tl.sum(acc, axis=1)
    tl.store(c_ptr + rows * stride_cm, out.to(c_ptr.dtype.element_ty), mask=row_ok)


def _matvec(A, B):
    M, K = A.shape
    C = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    _matvec_pipelined_kernel[(triton.cdiv(M, 4),)](
        A,
        B,
        C,
        M,
        K,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        C.stride(0),
        BLOCK_M=4,
        BLOCK_K=2048,
        NUM_STAGES=4,
        num_warps=8,
    )
    return C


def kernel_function(A, B):
    return _matvec(A, B)
