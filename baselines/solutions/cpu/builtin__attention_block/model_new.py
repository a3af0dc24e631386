"""ModelNew for builtin/attention_block.

C++ projections and per-head products, a causal row softmax.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Projections with the fused GEMM, per-head q k^T and p v read straight from the packed qkv
    (no transposes), and the causal mask applied inside the softmax kernel."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[-1]
        qkv = cuda_extension.gemm(x.contiguous(), self.qkv.weight, True, self.qkv.bias, None)
        scores = cuda_extension.attention_scores(qkv, self.num_heads, 1.0 / (c // self.num_heads) ** 0.5)
        probs = cuda_extension.softmax(scores, 1.0, 1.0, False, True)
        y = cuda_extension.attention_values(probs, qkv)
        return cuda_extension.gemm(y, self.proj.weight, True, self.proj.bias, None, post=4.0)
