"""Scale, add and ReLU: a three-op elementwise chain over two tensors."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y = relu(x * scale + residual) with a scalar scale: three eager kernels, one fused pass.",
    "sizes": {
        "small": {"batch_size": 32, "channels": 16, "length": 256},
        "default": {"batch_size": 128, "channels": 256, "length": 8192},
    },
}


class Model(nn.Module):
    """Multiplies by a fixed scale, adds a residual tensor, and clamps at zero."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.scale + residual)


batch_size = 128
channels = 256
length = 8192
scale = 1.75


def get_inputs():
    return [torch.randn(batch_size, channels, length), torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [scale]
