"""ModelNew for kernelbench/L2/1_Conv2D_ReLU_BiasAdd.

CuDNN convolution (fp32), then conv bias, ReLU and the added bias in one pass.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.conv2d(x.contiguous(), self.conv.weight, 0, self.conv.bias, None, None, None, None, 0.0,
                                     True, self.bias.reshape(-1), 1)
