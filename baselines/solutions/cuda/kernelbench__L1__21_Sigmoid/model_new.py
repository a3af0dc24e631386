"""ModelNew for kernelbench/L1/21_Sigmoid.

Sigmoid in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

SIGMOID = 2  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), SIGMOID, 0.0, 0.0)
