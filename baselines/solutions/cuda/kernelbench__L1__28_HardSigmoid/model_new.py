"""ModelNew for kernelbench/L1/28_HardSigmoid.

Hard sigmoid in one elementwise pass (the shared activation kernel).
"""
import torch
import torch.nn as nn

import cuda_extension

HARD_SIGMOID = 7  # op number of kernels/unary.cu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.unary(x.contiguous(), HARD_SIGMOID, 0.0, 0.0)
