"""ModelNew for kernelbench/L1/30_Softsign.

Softsign in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

SOFTSIGN = 9  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), SOFTSIGN, 0.0, 0.0)
