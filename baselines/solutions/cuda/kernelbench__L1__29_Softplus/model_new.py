"""ModelNew for kernelbench/L1/29_Softplus.

Softplus (beta 1, threshold 20) in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

SOFTPLUS = 8  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), SOFTPLUS, 0.0, 0.0)
