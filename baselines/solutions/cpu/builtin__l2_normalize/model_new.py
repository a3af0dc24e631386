"""ModelNew for builtin/l2_normalize.

One OpenMP task per row: the norm, then the scaled row.
"""
import torch
import torch.nn as nn

import cuda_extension

L2 = 2  # norm mode of kernels/rows.cpp


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.gain = nn.Parameter(torch.empty(cols))  # loaded from the reference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.norm(x.contiguous(), self.gain, None, L2, 1e-12)
