import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Bias add, exact GELU and scaling fused in one pass."""

    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.bias_gelu_scale(x.contiguous(), self.bias, self.scale)
