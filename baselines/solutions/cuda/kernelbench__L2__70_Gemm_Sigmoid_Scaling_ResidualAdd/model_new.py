"""ModelNew for kernelbench/L2/70_Gemm_Sigmoid_Scaling_ResidualAdd.

CuBLAS SGEMM, then sigmoid(y) * s + y with y = x W^T + b in one fused epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    """``self.gemm`` holds the reference's weights (its state_dict loads); it is never called."""

    def __init__(self, input_size, hidden_size, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(input_size, hidden_size)
        self.scale = float(scaling_factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(x.contiguous(), self.gemm.weight, True, self.gemm.bias, None,
                                   act=ACT_SIGMOID, post=self.scale, res_coef=1.0)
