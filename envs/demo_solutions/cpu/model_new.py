"""ModelNew for builtin/scale_add_relu: one fused C++ pass instead of three eager ops."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return cuda_extension.scale_add_relu(x.contiguous(), residual.contiguous(), self.scale)
