"""A whole block: one causal self-attention layer, the query, key and value projections, the
scaled and masked softmax of their products, and the output projection, on (4, 1024, 512)
activations with 8 heads. Written for kactors in KernelBench's format (level 3: a block of a
model)."""

import torch

BATCH = 4
TOKENS = 1024
HIDDEN = 512
HEADS = 8


class Model(torch.nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.out = torch.nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, hidden = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        shape = (batch, tokens, self.heads, hidden // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (hidden // self.heads) ** 0.5
        mask = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).triu(1)
        weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(batch, tokens, hidden))


def get_inputs():
    return [torch.randn(BATCH, TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, HEADS]
