import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """ReLU as relu(x * 1) with the vectorised scale-ReLU kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.scale_relu(x.contiguous(), 1.0)
