"""ModelNew for kernelbench/L2/76_Gemm_Add_ReLU.

CuBLAS SGEMM, then + bias and ReLU in one fused epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(x.contiguous(), self.gemm.weight, True, self.bias.reshape(-1), None, act=ACT_RELU)
