"""Issue 18's small matvec: C = A @ B with A of shape (512, 8192) in bf16, 8 MiB. Moving it takes
1.7 us at the H200's 4.8 TB/s, less than a launch: no floor can catch a memo here, so the
content changes must."""

import torch

M = 512
K = 8192
DTYPE = torch.bfloat16


class Model(torch.nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, 1)]


def get_init_inputs():
    return []
