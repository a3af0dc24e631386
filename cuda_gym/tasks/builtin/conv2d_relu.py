"""3x3 convolution with padding, bias and ReLU."""
import torch
import torch.nn as nn

TASK = {
    "level": 2,
    "description": "y = relu(conv2d(x, W, b, padding=1)) with a 3x3 kernel on NCHW input.",
    "sizes": {
        "small": {"batch_size": 2, "in_channels": 8, "out_channels": 16, "height": 32, "width": 32},
        "default": {"batch_size": 128, "in_channels": 64, "out_channels": 128, "height": 128, "width": 128},
    },
}


class Model(nn.Module):
    """A same-padded 3x3 Conv2d followed by ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


batch_size = 128
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
