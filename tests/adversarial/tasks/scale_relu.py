import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x * scale)."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale)


batch = 64
dim = 4096
scale = 1.5


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return [scale]
