"""ModelNew for kernelbench/L1/23_Softmax.

Softmax over dim 1, one block per row (online max and sum).
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.softmax(x.contiguous(), 1.0, 1.0, False, False)
