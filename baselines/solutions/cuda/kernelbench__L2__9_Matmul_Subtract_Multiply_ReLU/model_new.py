"""ModelNew for kernelbench/L2/9_Matmul_Subtract_Multiply_ReLU.

CuBLAS SGEMM, then relu((x W^T + b - s) * m) in one fused epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    """``self.linear`` holds the reference's weights (its state_dict loads); it is never called."""

    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.sub = float(subtract_value)
        self.mul = float(multiply_value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(x.contiguous(), self.linear.weight, True, self.linear.bias, None,
                                   act=ACT_RELU, sub=self.sub, mul=self.mul)
