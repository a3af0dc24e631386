"""ModelNew for builtin/conv_bn_relu_pool.

A direct C++ convolution with batch norm, ReLU and 2x2 max pooling fused into its output loop.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn = self.bn
        return cuda_extension.conv2d(x.contiguous(), self.conv.weight, 1, None, bn.weight, bn.bias, bn.running_mean,
                                     bn.running_var, bn.eps, True, None, 2)
