"""Convolution, batch norm (inference statistics), ReLU and 2x2 max pooling."""
import torch
import torch.nn as nn

TASK = {
    "level": 2,
    "description": "A CNN stage: conv3x3 -> BatchNorm (eval) -> ReLU -> MaxPool2d(2); BN folds into the conv.",
    "sizes": {
        "small": {"batch_size": 2, "in_channels": 8, "out_channels": 16, "height": 32, "width": 32},
        "default": {"batch_size": 128, "in_channels": 64, "out_channels": 128, "height": 112, "width": 112},
    },
}


class Model(nn.Module):
    """Conv2d + BatchNorm2d with fixed running statistics + ReLU + 2x2 max pool."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.2, 0.2)
            self.bn.running_var.uniform_(0.05, 0.5)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.3, 0.3)
        self.bn.eval()
        self.pool = nn.MaxPool2d(2)

    def train(self, mode: bool = True) -> "Model":
        super().train(mode)
        self.bn.eval()  # the reference always uses the running statistics
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.bn(self.conv(x))))


batch_size = 128
in_channels = 64
out_channels = 128
height = 112
width = 112


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
