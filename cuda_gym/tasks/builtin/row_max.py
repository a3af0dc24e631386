"""Row-wise maximum of a matrix with per-row scales, so the maxima vary widely."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y[i] = max_j x[i, j] * s[i]: a max reduction over the last dimension.",
    "sizes": {
        "small": {"rows": 256, "cols": 512},
        "default": {"rows": 65536, "cols": 16384},
    },
}


class Model(nn.Module):
    """Returns the maximum of each row after multiplying it by its own scale."""

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return (x * scale).amax(dim=1)


rows = 65536
cols = 16384


def get_inputs():
    return [torch.randn(rows, cols), torch.rand(rows, 1) * 4.0 + 0.5]


def get_init_inputs():
    return []
