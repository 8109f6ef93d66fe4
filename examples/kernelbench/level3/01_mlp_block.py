"""A whole block: a transformer's MLP with its residual, LayerNorm, Linear (1024 to 4096), GELU,
Linear (4096 to 1024), plus the input, on (8, 512, 1024) activations. Written for kactors in
KernelBench's format (level 3: a block of a model)."""

import torch

BATCH = 8
TOKENS = 512
HIDDEN = 1024
EXPANSION = 4


class Model(torch.nn.Module):
    def __init__(self, hidden: int, expansion: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden)
        self.up = torch.nn.Linear(hidden, hidden * expansion)
        self.down = torch.nn.Linear(hidden * expansion, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def get_inputs():
    return [torch.randn(BATCH, TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, EXPANSION]
