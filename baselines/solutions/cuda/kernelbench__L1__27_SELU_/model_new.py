"""ModelNew for kernelbench/L1/27_SELU_.

SELU in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

SELU = 6  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), SELU, 0.0, 0.0)
