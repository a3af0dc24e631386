import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """sigmoid(x) with one fused elementwise kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.sigmoid_forward(x.contiguous())
