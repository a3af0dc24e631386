"""ModelNew for builtin/layernorm.

One block per row: mean, centred variance, affine.
"""
import torch
import torch.nn as nn

import cuda_extension

LAYERNORM = 0  # norm mode of kernels/rows.cu


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.norm(x.contiguous(), self.norm.weight, self.norm.bias, LAYERNORM, self.norm.eps)
