"""ModelNew for builtin/softmax.

The row softmax kernel with the temperature and the length scale folded in.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = float(temperature)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.softmax(x.contiguous(), 1.0 / self.temperature, float(x.shape[-1]), False, False)
