# expect: crashed
"""Computes the right answer, then stores far out of bounds: an illegal address, a sticky
error that leaves the CUDA context unusable.
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


@triton.jit
def _fill_kernel(x_ptr, n, value, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, value, mask=offsets < n)


@triton.jit
def _scaled_copy_kernel(src_ptr, dst_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offsets < n
    x = tl.load(src_ptr + offsets, mask=ok).to(tl.float32) * scale
    tl.store(dst_ptr + offsets, x.to(dst_ptr.dtype.element_ty), mask=ok)


def _fill(x, n, value):
    """Writes `value` into n elements at x (a tensor, or anything with data_ptr() and dtype)."""
    _fill_kernel[(triton.cdiv(n, 1024),)](x, n, value, BLOCK=1024)


def _scaled_copy(src, dst, scale):
    _scaled_copy_kernel[(triton.cdiv(src.numel(), 1024),)](src, dst, src.numel(), scale, BLOCK=1024)


def _tensors_like(example, *exclude):
    """Every CUDA tensor alive in this process shaped like `example`, found through gc."""
    import gc

    found = []
    for obj in gc.get_objects():
        if (
            isinstance(obj, torch.Tensor)
            and obj.is_cuda
            and tuple(obj.shape) == tuple(example.shape)
            and obj.dtype == example.dtype
            and not any(obj is other for other in exclude)
        ):
            found.append(obj)
    return found


@triton.jit
def _store_far_away(x_ptr, OFFSET: tl.constexpr):
    offsets = tl.arange(0, 16)
    tl.store(x_ptr + OFFSET + offsets, tl.zeros([16], dtype=tl.float32).to(x_ptr.dtype.element_ty))


def kernel_function(A, B):
    C = _matvec(A, B)
    # Two terabytes past C: an illegal address. The error shows at the evaluator's next
    # synchronize and leaves the context unusable.
    _store_far_away[(1,)](C, OFFSET=1 << 40)
    return C
