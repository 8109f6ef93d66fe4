"""Softmax over rows (the initial kernel of issue 18's softmax problem)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offsets = tl.arange(0, BLOCK)
    running_max = tl.full([BLOCK], float("-inf"), tl.float32)
    running_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_row + start + offsets, mask=start + offsets < cols, other=float("-inf"))
        x = x.to(tl.float32)
        new_max = tl.maximum(running_max, x)
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.exp(x - new_max)
        running_max = new_max
    row_max = tl.max(running_max, axis=0)
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), axis=0)
    for start in range(0, cols, BLOCK):
        mask = start + offsets < cols
        x = tl.load(x_row + start + offsets, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(
            y_row + start + offsets,
            (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty),
            mask=mask,
        )


def kernel_function(x):
    rows, cols = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(rows,)](x, y, cols, BLOCK=4096, num_warps=8)
    return y
