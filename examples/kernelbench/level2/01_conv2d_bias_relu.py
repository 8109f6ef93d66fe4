"""Fused operators: a 3x3 Conv2d, then an added per-channel bias, then ReLU, on (32, 32, 128, 128)
images. Written for kactors in KernelBench's format (level 2: a few operators to fuse)."""

import torch

BATCH = 32
IN_CHANNELS = 32
OUT_CHANNELS = 64
SIZE = 128
KERNEL = 3


class Model(torch.nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.bias = torch.nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
