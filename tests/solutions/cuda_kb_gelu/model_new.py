import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Exact GELU with the fused bias-GELU-scale kernel (zero bias, scale 1)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        zero_bias = torch.zeros(x.size(-1), device=x.device, dtype=x.dtype)
        return cuda_extension.bias_gelu_scale(x, zero_bias, 1.0)
