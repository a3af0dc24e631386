"""ModelNew for builtin/row_max.

One block per row: max of x * s without the scaled copy.
"""
import torch
import torch.nn as nn

import cuda_extension

MAX = 1  # reduce op of kernels/rows.cu


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return cuda_extension.reduce(x.contiguous(), scale.contiguous(), MAX)
