"""RMS normalization with a learnable weight, for scripts/h200/profiled_call.sh (issue 12).

Input x has shape (BATCH, FEATURES, HEIGHT, WIDTH) = (8, 128, 32, 32); the output is
x / sqrt(mean(x^2 over dim 1) + eps) * weight, weight one value per feature. Two attributes of
the model are kernel_function parameters: weight (a parameter, drawn at random, so that building
the model consumes the random generator the inputs are drawn from next) and eps (a plain float).
"""

import torch

BATCH = 8
FEATURES = 128
HEIGHT = 32
WIDTH = 32
EPS = 1e-5
DTYPE = torch.bfloat16


class Model(torch.nn.Module):
    def __init__(self, num_features: int, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(num_features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        rms = torch.sqrt(torch.mean(x32 * x32, dim=1, keepdim=True) + self.eps)
        return (x32 / rms * self.weight.float().view(1, -1, 1, 1)).to(x.dtype)


def get_inputs():
    return [torch.rand(BATCH, FEATURES, HEIGHT, WIDTH)]


def get_init_inputs():
    return [FEATURES, EPS]
