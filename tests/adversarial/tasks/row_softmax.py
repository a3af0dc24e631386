import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D input."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


batch = 1024
dim = 64


def get_inputs():
    return [torch.randn(batch, dim) * 3.0]


def get_init_inputs():
    return []
