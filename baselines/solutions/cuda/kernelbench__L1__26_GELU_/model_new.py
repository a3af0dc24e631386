"""ModelNew for kernelbench/L1/26_GELU_.

Exact (erf) GELU in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

GELU_ERF = 5  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), GELU_ERF, 0.0, 0.0)
