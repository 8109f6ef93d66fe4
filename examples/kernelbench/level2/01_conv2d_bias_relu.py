"""Fused operators: a 3x3 Conv2d without its own bias, then an added per-channel bias, then ReLU,
on (32, 32, 128, 128) images. Written for kactors in KernelBench's format (level 2: a few
operators to fuse)."""

import torch

SHAPE = (32, 32, 128, 128)
CHANNELS_OUT = 64


class Model(torch.nn.Module):
    def __init__(self, channels_in: int, channels_out: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=False)
        self.bias = torch.nn.Parameter(torch.randn(channels_out, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_init_inputs():
    return [SHAPE[1], CHANNELS_OUT]
