"""Matrix multiply, scale and residual add."""
import torch
import torch.nn as nn

TASK = {
    "level": 2,
    "description": "y = (a @ b) * alpha + c: a GEMM whose scale and residual add fit in the epilogue.",
    "sizes": {
        "small": {"m": 128, "k": 128, "n": 128},
        "default": {"m": 4096, "k": 4096, "n": 4096},
    },
}


class Model(nn.Module):
    """Computes ``a @ b * alpha + c`` with a fixed scalar ``alpha``."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b) * self.alpha + c


m = 4096
k = 4096
n = 4096
alpha = 0.125


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n), torch.randn(m, n)]


def get_init_inputs():
    return [alpha]
