"""Matrix-vector product C = A @ B, the PyTorch reference for optimize_01_matvec.

Shapes: A is (M, K) = (2048, 1048576), B is (K, 1), C is (M, 1).
Dtype: bfloat16. get_inputs() draws float32 values as KernelBench does; the evaluator (and
test.py) casts floating inputs and the model to DTYPE before running, as KernelAgent's test.py
does. A alone is 2^31 elements (4 GiB in bf16), so element offsets into A overflow int32.
"""

import torch

M = 2048
K = 1048576
DTYPE = torch.bfloat16


class Model(torch.nn.Module):
    """C = A @ B for a matrix A of shape (M, K) and a column vector B of shape (K, 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    # No device=: with torch's default device set to a GPU the 8 GiB draw happens there.
    A = torch.rand(M, K)
    B = torch.rand(K, 1)
    return [A, B]


def get_init_inputs():
    return []
