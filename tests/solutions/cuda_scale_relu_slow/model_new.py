import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """relu(x * scale), honest but slow: one thread per row, many passes (the base of the CUDA native-code hacks)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.scale_relu(x.contiguous(), self.scale)
