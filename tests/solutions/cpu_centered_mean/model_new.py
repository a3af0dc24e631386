import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Row mean minus 0.5 with a double accumulator."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.centered_mean(x.contiguous())
