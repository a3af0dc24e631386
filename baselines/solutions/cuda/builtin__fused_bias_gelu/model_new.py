"""ModelNew for builtin/fused_bias_gelu.

X + bias and the tanh GELU in one pass.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bias_gelu(x.contiguous(), self.bias)
