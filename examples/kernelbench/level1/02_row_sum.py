"""Reduction: the sum of each row of a (8192, 8192) tensor, keeping the reduced dimension.
Written for kactors in KernelBench's format."""

import torch

ROWS = 8192
COLS = 8192


class Model(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [1]
