"""Fused operators: a Linear (2048 to 4096) with its bias, then GELU, then a per-feature scale,
on (4096, 2048) rows: a matmul whose epilogue does the rest. Written for kactors in
KernelBench's format (level 2: a few operators to fuse)."""

import torch

ROWS = 4096
FEATURES_IN = 2048
FEATURES_OUT = 4096


class Model(torch.nn.Module):
    def __init__(self, features_in: int, features_out: int):
        super().__init__()
        self.linear = torch.nn.Linear(features_in, features_out)
        self.scale = torch.nn.Parameter(torch.rand(features_out) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(ROWS, FEATURES_IN)]


def get_init_inputs():
    return [FEATURES_IN, FEATURES_OUT]
