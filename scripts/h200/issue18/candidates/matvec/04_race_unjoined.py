# expect: race
"""Issue 18's race: work left on a side stream the caller never waits for.

The matvec of candidate 00 launched on a stream of its own, and kernel_function returns without making the caller's stream wait for it: the output races whatever the caller does next.
"""

import torch
import triton
import triton.language as tl

_side = {}


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
    side = _side.setdefault("stream", torch.cuda.Stream())
    C = torch.empty((A.shape[0], 1), device=A.device, dtype=A.dtype)
    caller = torch.cuda.current_stream()
    side.wait_stream(caller)
    with torch.cuda.stream(side):
        M, K = A.shape
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
