"""ModelNew for kernelbench/L1/1_Square_matrix_multiplication_.

CuBLAS SGEMM (full fp32), no epilogue.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(A.contiguous(), B.contiguous(), False, None, None)
