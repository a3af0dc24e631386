import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Row softmax: max, exp-sum and scale in one OpenMP loop per row."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.row_softmax(x.contiguous())
