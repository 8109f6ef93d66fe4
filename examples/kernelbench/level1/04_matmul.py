"""Matmul: C = A @ B with A (4096, 2048) and B (2048, 4096). Written for kactors in
KernelBench's format."""

import torch

M, K, N = 4096, 2048, 4096


class Model(torch.nn.Module):
    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return A @ B


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
