"""LayerNorm over the last dimension with learned affine parameters."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "nn.LayerNorm(hidden) on a [tokens, hidden] matrix: mean/variance per row, then affine.",
    "sizes": {
        "small": {"tokens": 256, "hidden": 512},
        "default": {"tokens": 131072, "hidden": 4096},
    },
}


class Model(nn.Module):
    """Layer normalization with non-trivial weight and bias."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


tokens = 131072
hidden = 4096


def get_inputs():
    return [torch.randn(tokens, hidden) * 2.0 + 0.5]


def get_init_inputs():
    return [hidden]
