"""Matvec candidate 04: explicitly pipelined K loop with streaming cache hints.

The K loop is a tl.range with num_stages = 4, asking Triton to issue the loads of the next three
chunks while the current one is multiplied, so each SM keeps several 16 KiB requests in flight
without needing more warps. A is read exactly once, so its loads carry evict_first and do not
push B (2 MiB, read by every program) out of L2; B's loads carry evict_last to keep it there.
Tiles are BLOCK_M = 4 rows by BLOCK_K = 2048 columns, eight warps, fp32 accumulation.
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
    # 64-bit row indices: row * stride_am reaches 2^31 in A.
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    cols = tl.arange(0, BLOCK_K)
    a_rows = a_ptr + rows[:, None] * stride_am
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float32)
    for k0 in tl.range(0, K, BLOCK_K, num_stages=NUM_STAGES):
        k = k0 + cols
        k_ok = k < K
        b = tl.load(b_ptr + k * stride_bk, mask=k_ok, other=0.0, eviction_policy="evict_last").to(
            tl.float32
        )
        a = tl.load(
            a_rows + k[None, :] * stride_ak,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
            eviction_policy="evict_first",
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
    _matvec_pipelined_kernel[(triton.cdiv(M, BLOCK_M),)](
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
        NUM_STAGES=4,
        num_warps=8,
    )
    return C
