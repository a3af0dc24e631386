"""ModelNew for kernelbench/L1/25_Swish.

X * sigmoid(x) in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

SWISH = 4  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), SWISH, 0.0, 0.0)
