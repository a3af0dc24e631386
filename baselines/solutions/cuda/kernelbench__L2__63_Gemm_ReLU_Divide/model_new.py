"""ModelNew for kernelbench/L2/63_Gemm_ReLU_Divide.

CuBLAS SGEMM, then relu(x W^T + b) / d in one fused epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    """``self.linear`` holds the reference's weights (its state_dict loads); it is never called."""

    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.inv = 1.0 / float(divisor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(x.contiguous(), self.linear.weight, True, self.linear.bias, None,
                                   act=ACT_RELU, post=self.inv)
