"""ModelNew for kernelbench/L2/59_Matmul_Swish_Scaling.

CuBLAS SGEMM, then swish(x W^T + b) * s in one fused epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    """``self.matmul`` holds the reference's weights (its state_dict loads); it is never called."""

    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scale = float(scaling_factor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(x.contiguous(), self.matmul.weight, True, self.matmul.bias, None,
                                   act=ACT_SWISH, post=self.scale)
