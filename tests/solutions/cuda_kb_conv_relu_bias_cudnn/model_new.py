import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """cuDNN convolution (FMA math) plus one fused conv-bias, ReLU and bias pass.

    ``self.conv`` only holds the weights so the reference state_dict loads; it is never called.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.conv_relu_bias(
            x.contiguous(), self.conv.weight.contiguous(), self.conv.bias, self.bias.view(-1)
        )
