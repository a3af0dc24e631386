"""Inclusive prefix sum along rows."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y = cumsum(x, dim=1): a scan, harder to parallelise than a reduction.",
    "sizes": {
        "small": {"rows": 64, "cols": 1024},
        "default": {"rows": 65536, "cols": 8192},
    },
}


class Model(nn.Module):
    """Cumulative sum over the last dimension."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


rows = 65536
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
