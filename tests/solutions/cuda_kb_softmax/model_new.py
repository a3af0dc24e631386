import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Softmax over dim 1: one block per row, online max and sum, float4 loads."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.block_softmax(x.contiguous())
