"""Elementwise: ReLU of a (4096, 16384) tensor. Written for kactors in KernelBench's format."""

import torch

BATCH = 4096
DIM = 16384


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
