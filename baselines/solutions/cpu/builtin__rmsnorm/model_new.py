"""ModelNew for builtin/rmsnorm.

One OpenMP task per row: mean of squares, then the scaled row.
"""
import torch
import torch.nn as nn

import cuda_extension

RMSNORM = 1  # norm mode of kernels/rows.cpp


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden))  # loaded from the reference
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.norm(x.contiguous(), self.weight, None, RMSNORM, self.eps)
