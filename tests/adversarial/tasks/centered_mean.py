import torch
import torch.nn as nn


class Model(nn.Module):
    """Row mean of uniform inputs minus 0.5: a low-variance output (about 0.002 std)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=1) - 0.5


batch = 64
dim = 16384


def get_inputs():
    return [torch.rand(batch, dim)]


def get_init_inputs():
    return []
