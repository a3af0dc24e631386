"""ModelNew for kernelbench/L2/12_Gemm_Multiply_LeakyReLU.

CuBLAS SGEMM, then leaky_relu((x W^T + b) * m) in one fused epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    """``self.gemm`` holds the reference's weights (its state_dict loads); it is never called."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.mul = float(multiplier)
        self.slope = float(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(x.contiguous(), self.gemm.weight, True, self.gemm.bias, None,
                                   act=ACT_LEAKY_RELU, mul=self.mul, slope=self.slope)
