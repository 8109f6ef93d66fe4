"""RMSNorm candidate 91: DELIBERATELY CRASHING. Reads far out of bounds and kills the CUDA context.

Candidate 01's single-pass tile kernel with its masks removed and a huge constant (2^50 elements,
2 PiB) added to every load address, as a wrong base-pointer computation would. The load faults in
the GPU's MMU: the launch ends in "an illegal memory access was encountered", a sticky error
after which the process's CUDA context is unusable and every later CUDA call fails. It exists so
that the evaluator's crash path (fail this candidate, restart the evaluator, carry on with the
next) is exercised on a real GPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_oob_kernel(
    x_ptr,
    y_ptr,
    C,
    S,
    eps,
    BAD_OFFSET: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    pid_s = tl.program_id(0)
    n = tl.program_id(1).to(tl.int64)
    offs_s = pid_s * BLOCK_S + tl.arange(0, BLOCK_S)
    offs_c = tl.arange(0, BLOCK_C)
    offs = n * C * S + offs_c[:, None].to(tl.int64) * S + offs_s[None, :]
    x = tl.load(x_ptr + BAD_OFFSET + offs).to(tl.float32)
    inv_rms = tl.math.rsqrt(tl.sum(x * x, axis=0) / C + eps)
    tl.store(y_ptr + offs, (x * inv_rms[None, :]).to(y_ptr.dtype.element_ty))


def kernel_function(x, eps=1e-5):
    """Meant to be RMS norm over dim 1; faults on its first load (see the module docstring)."""
    x = x.contiguous()
    N, C = x.shape[0], x.shape[1]
    S = x.numel() // (N * C)
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    BLOCK_S = 128
    _rmsnorm_oob_kernel[(triton.cdiv(S, BLOCK_S), N)](
        x,
        y,
        C,
        S,
        float(eps),
        BAD_OFFSET=1 << 50,
        BLOCK_C=triton.next_power_of_2(C),
        BLOCK_S=BLOCK_S,
        num_warps=4,
    )
    return y
