#!/usr/bin/env python3
"""Writes the replayed LLM answers of issue 20's H200 runs (scripts/h200/issue20/issue20.sh):
one folder per problem of examples/kernelbench, whose .py files the replay provider hands out
in name order, in the order the requests go out.

    python3 replies.py OUT_DIR

- relu, layernorm, matmul: two seeds that pass (the first starts the search), then two
  proposals for round 1 and two for round 2 (beam 1 x 2), each a different block shape.
- row_sum: one seed that fails twice (the reduced dimension dropped, then a mean instead of a
  sum) and passes at its second refinement, then the rounds' proposals.
Every kernel computes in float32 and stores in its output's dtype (the evaluator's default is
bfloat16), and allocates its output with torch.empty (the aten allowlist's rule).
"""

import sys
from pathlib import Path

HEADER = "import torch\nimport triton\nimport triton.language as tl\n\n"

RELU = HEADER + '''
@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


def kernel_function(x):
    """ReLU, {BLOCK} elements per program, {WARPS} warps."""
    y = torch.empty_like(x)
    n = x.numel()
    _relu_kernel[(triton.cdiv(n, {BLOCK}),)](x, y, n, BLOCK={BLOCK}, num_warps={WARPS})
    return y
'''

LAYERNORM = HEADER + '''
@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    columns = tl.arange(0, BLOCK)
    mask = columns < hidden
    x = tl.load(x_ptr + row * hidden + columns, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / hidden
    centred = tl.where(mask, x - mean, 0.0)
    variance = tl.sum(centred * centred, axis=0) / hidden
    w = tl.load(w_ptr + columns, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + columns, mask=mask).to(tl.float32)
    y = centred * tl.rsqrt(variance + eps) * w + b
    tl.store(y_ptr + row * hidden + columns, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel_function(x, weight, bias, eps):
    """LayerNorm over the last dimension, one row per program, {WARPS} warps."""
    hidden = x.shape[-1]
    y = torch.empty_like(x)
    rows = x.numel() // hidden
    _layernorm_kernel[(rows,)](x, weight, bias, y, hidden, eps,
                               BLOCK=triton.next_power_of_2(hidden), num_warps={WARPS})
    return y
'''

MATMUL = HEADER + '''
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    programs_m = tl.cdiv(M, BLOCK_M)
    programs_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * programs_n)
    first_m = group * GROUP_M
    group_size = min(programs_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group_size)
    pid_n = (pid % (GROUP_M * programs_n)) // group_size
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inner = tl.arange(0, BLOCK_K)
    a = a_ptr + rows[:, None] * stride_am + inner[None, :] * stride_ak
    b = b_ptr + inner[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a_tile = tl.load(a, mask=(rows[:, None] < M) & (inner[None, :] < left), other=0.0)
        b_tile = tl.load(b, mask=(inner[:, None] < left) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a_tile, b_tile)
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def kernel_function(A, B):
    """C = A @ B in {BM} x {BN} tiles, K in steps of {BK}, {WARPS} warps, {STAGES} stages."""
    M, K = A.shape
    N = B.shape[1]
    C = torch.empty((M, N), device=A.device, dtype=A.dtype)
    grid = (triton.cdiv(M, {BM}) * triton.cdiv(N, {BN}),)
    _matmul_kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1),
                         C.stride(0), C.stride(1), BLOCK_M={BM}, BLOCK_N={BN}, BLOCK_K={BK},
                         GROUP_M=8, num_warps={WARPS}, num_stages={STAGES})
    return C
'''

ROW_SUM = HEADER + '''
@triton.jit
def _row_sum_kernel(x_ptr, y_ptr, columns, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, columns, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * columns + offsets, mask=offsets < columns, other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0){SCALE}
    tl.store(y_ptr + row, total.to(y_ptr.dtype.element_ty))


def kernel_function(x, dim):
    """The sum of each row{WHAT}, {BLOCK} columns a step, {WARPS} warps."""
    rows, columns = x.shape
    y = torch.empty({SHAPE}, device=x.device, dtype=x.dtype)
    _row_sum_kernel[(rows,)](x, y, columns, BLOCK={BLOCK}, num_warps={WARPS})
    return y
'''


def fill(template, **values):
    text = template
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return text


def relu(block, warps):
    return fill(RELU, BLOCK=block, WARPS=warps)


def layernorm(warps):
    return fill(LAYERNORM, WARPS=warps)


def matmul(bm, bn, bk, warps, stages):
    return fill(MATMUL, BM=bm, BN=bn, BK=bk, WARPS=warps, STAGES=stages)


def row_sum(block, warps, shape="(rows, 1)", scale="", what=""):
    return fill(ROW_SUM, BLOCK=block, WARPS=warps, SHAPE=shape, SCALE=scale, WHAT=what)


PROBLEMS = {
    "relu": [relu(1024, 4), relu(2048, 4), relu(4096, 8), relu(8192, 8), relu(2048, 8), relu(16384, 16)],
    "layernorm": [layernorm(8), layernorm(16), layernorm(4), layernorm(32), layernorm(2), layernorm(1)],
    "matmul": [matmul(128, 128, 32, 4, 3), matmul(64, 64, 32, 4, 3), matmul(128, 256, 64, 8, 3),
               matmul(128, 128, 64, 8, 4), matmul(256, 128, 64, 8, 3), matmul(64, 128, 64, 4, 4)],
    "row_sum": [
        row_sum(1024, 4, shape="(rows,)", what=" (the reduced dimension dropped: wrong shape)"),
        row_sum(1024, 4, scale=" / columns", what=" divided by its length (a mean: wrong values)"),
        row_sum(1024, 4),
        row_sum(2048, 8), row_sum(4096, 8), row_sum(8192, 16), row_sum(512, 4),
    ],
}


def main(out):
    for problem, kernels in PROBLEMS.items():
        folder = Path(out) / problem
        folder.mkdir(parents=True, exist_ok=True)
        for index, source in enumerate(kernels):
            (folder / f"{index:02d}.py").write_text(source)


if __name__ == "__main__":
    main(sys.argv[1])
