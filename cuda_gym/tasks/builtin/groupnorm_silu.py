"""GroupNorm followed by SiLU, as in diffusion U-Nets."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TASK = {
    "level": 2,
    "description": "y = silu(group_norm(x)) on NCHW input: per-group statistics, affine, then activation.",
    "sizes": {
        "small": {"batch_size": 2, "channels": 32, "height": 16, "width": 16, "groups": 8},
        "default": {"batch_size": 256, "channels": 256, "height": 64, "width": 64, "groups": 32},
    },
}


class Model(nn.Module):
    """GroupNorm with learned affine parameters, then SiLU."""

    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 2.0)
            self.norm.bias.uniform_(-1.0, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


batch_size = 256
channels = 256
height = 64
width = 64
groups = 32


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [groups, channels]
