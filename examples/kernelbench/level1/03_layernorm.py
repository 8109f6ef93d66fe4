"""Normalization: LayerNorm over the last dimension (4096) of a (16, 1024, 4096) tensor, with a
learnable weight and bias. Written for kactors in KernelBench's format."""

import torch

BATCH = 16
TOKENS = 1024
HIDDEN = 4096


class Model(torch.nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
