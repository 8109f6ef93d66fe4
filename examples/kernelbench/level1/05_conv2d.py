"""Convolution: a 3x3 Conv2d, 64 to 128 channels, stride 1, padding 1, on (32, 64, 128, 128)
images. Written for kactors in KernelBench's format."""

import torch

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
SIZE = 128
KERNEL = 3


class Model(torch.nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
