"""ModelNew for kernelbench/L1/24_LogSoftmax.

Log-softmax over dim 1, one block per row.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        assert dim in (1, -1), "the kernel reduces the last dimension of a 2-D input"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.softmax(x.contiguous(), 1.0, 1.0, True, False)
