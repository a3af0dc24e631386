"""ModelNew for kernelbench/L1/39_L2Norm_.

X / ||x||_2 over dim 1, one block per row.
"""
import torch
import torch.nn as nn

import cuda_extension

L2 = 2  # norm mode of kernels/rows.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.norm(x.contiguous(), None, None, L2, 0.0)
