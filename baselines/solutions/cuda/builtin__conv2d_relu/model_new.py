"""ModelNew for builtin/conv2d_relu.

CuDNN convolution (fp32), then bias and ReLU in one pass.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.conv2d(x.contiguous(), self.conv.weight, self.conv.padding[0], self.conv.bias, None, None,
                                     None, None, 0.0, True, None, 1)
