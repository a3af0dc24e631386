"""ModelNew for kernelbench/L1/88_MinGPTNewGelu.

Tanh-approximated GELU in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

GELU_TANH = 12  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), GELU_TANH, 0.0, 0.0)
