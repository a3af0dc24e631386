import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """relu(x * scale) in one vectorised CUDA pass."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.scale_relu(x.contiguous(), self.scale)
