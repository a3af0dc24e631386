"""Row-wise sum reduction of a matrix."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y[i] = sum_j x[i, j]: a bandwidth-bound reduction over the last dimension.",
    "sizes": {
        "small": {"rows": 128, "cols": 1024},
        "default": {"rows": 131072, "cols": 8192},
    },
}


class Model(nn.Module):
    """Sums each row of a 2-D input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


rows = 131072
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
