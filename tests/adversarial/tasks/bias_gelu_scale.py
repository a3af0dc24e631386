import torch
import torch.nn as nn


class Model(nn.Module):
    """y = gelu(x + bias) * scale, bias broadcast over the last dimension (tanh-free exact GELU)."""

    def __init__(self, dim: int, scale: float):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x + self.bias) * self.scale


batch = 64
dim = 4096
scale = 0.5


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return [dim, scale]
