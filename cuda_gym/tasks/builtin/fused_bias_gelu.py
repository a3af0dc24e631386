"""Bias add followed by the tanh-approximated GELU, elementwise over a matrix."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TASK = {
    "level": 1,
    "description": "y = gelu_tanh(x + bias): a per-column bias then GELU (tanh form), memory bound.",
    "sizes": {
        "small": {"batch_size": 64, "features": 512},
        "default": {"batch_size": 65536, "features": 8192},
    },
}


class Model(nn.Module):
    """Adds a learned per-feature bias, then applies GELU with the tanh approximation."""

    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + self.bias, approximate="tanh")


batch_size = 65536
features = 8192


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
