"""ModelNew for builtin/row_max.

One OpenMP task per row: max of x * s without the scaled copy.
"""
import torch
import torch.nn as nn

import cuda_extension

MAX = 1  # reduce op of kernels/rows.cpp


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return cuda_extension.reduce(x.contiguous(), scale.contiguous(), MAX)
