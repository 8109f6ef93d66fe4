"""Matvec candidate 91: DELIBERATELY CRASHING. Reads far out of bounds and kills the CUDA context.

A one-row-per-program matvec kernel with its masks removed and a huge constant
(2^50 elements, 2 PiB) added to every address into A, as a wrong base-pointer computation would.
The first load faults in the GPU's MMU: the launch ends in "an illegal memory access was
encountered", a sticky error after which the process's CUDA context is unusable and every later
CUDA call fails. It exists so that the evaluator's crash path (fail this candidate, restart the
evaluator, carry on with the next) is exercised on a real GPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _matvec_row_oob_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_cm,
    BAD_OFFSET: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    a_row = a_ptr + row * stride_am + BAD_OFFSET
    cols = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_K], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + cols
        a = tl.load(a_row + k * stride_ak)
        b = tl.load(b_ptr + k * stride_bk)
        acc += a.to(tl.float32) * b.to(tl.float32)
    tl.store(c_ptr + row * stride_cm, tl.sum(acc, axis=0).to(c_ptr.dtype.element_ty))


def kernel_function(A, B):
    """Meant to compute C = A @ B; faults on its first load (see the module docstring)."""
    M, K = A.shape
    C = torch.empty((M, 1), device=A.device, dtype=A.dtype)
    _matvec_row_oob_kernel[(M,)](
        A,
        B,
        C,
        K,
        A.stride(0),
        A.stride(1),
        B.stride(0),
        C.stride(0),
        BAD_OFFSET=1 << 50,
        BLOCK_K=512,
        num_warps=4,
    )
    return C
