"""Issue 18's softmax, shaped like KernelBench's level-1 23_Softmax but smaller: x of shape
(4096, 65536) in bf16, softmax over each row, so every output is about 1.5e-5. An absolute
tolerance of 1e-2 is 600 times the outputs: a kernel that writes x * 1e-6 passed it."""

import torch

ROWS = 4096
COLS = 65536
DTYPE = torch.bfloat16


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
