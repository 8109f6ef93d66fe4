"""RMS normalization over the feature dimension, the PyTorch reference for optimize_02_rmsnorm.

Input x has shape (BATCH, FEATURES, DIM1, DIM2) = (112, 64, 512, 512); the output has the same
shape and is x / sqrt(mean(x^2 over dim 1) + eps) with eps = 1e-5. There is no learnable weight
(KernelBench's RMSNorm: the module keeps only num_features and eps).
Dtype: bfloat16. get_inputs() draws float32 values as KernelBench does; the evaluator (and
test.py) casts floating inputs and the model to DTYPE before running, as KernelAgent's test.py
does. x holds 1 879 048 192 elements (3.5 GiB in bf16).
"""

import torch

BATCH = 112
FEATURES = 64
DIM1 = 512
DIM2 = 512
EPS = 1e-5
DTYPE = torch.bfloat16


class Model(torch.nn.Module):
    """y = x / sqrt(mean(x^2, dim=1, keepdim=True) + eps), no learnable parameters."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms


def get_inputs():
    # No device=: with torch's default device set to a GPU the 7 GiB draw happens there.
    x = torch.rand(BATCH, FEATURES, DIM1, DIM2)
    return [x]


def get_init_inputs():
    return [FEATURES, EPS]
