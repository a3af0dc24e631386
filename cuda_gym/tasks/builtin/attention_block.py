"""Causal multi-head self-attention with input and output projections."""
import math

import torch
import torch.nn as nn

TASK = {
    "level": 3,
    "description": "QKV projection, causal softmax(QK^T/sqrt(d))V over heads, output projection, residual add.",
    "sizes": {
        "small": {"batch_size": 2, "seq_len": 32, "embed_dim": 64, "num_heads": 4},
        "default": {"batch_size": 16, "seq_len": 1024, "embed_dim": 1024, "num_heads": 16},
    },
}


class Model(nn.Module):
    """A pre-projection causal attention block, written with explicit matmuls and softmax."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        with torch.no_grad():
            self.qkv.weight.mul_(3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        h = self.num_heads
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, h, c // h).transpose(1, 2)
        k = k.view(b, t, h, c // h).transpose(1, 2)
        v = v.view(b, t, h, c // h).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // h)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.proj(y) * 4.0


batch_size = 16
seq_len = 1024
embed_dim = 1024
num_heads = 16


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
