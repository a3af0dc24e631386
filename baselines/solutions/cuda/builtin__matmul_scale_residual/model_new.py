"""ModelNew for builtin/matmul_scale_residual.

CuBLAS SGEMM, then * alpha + c in one epilogue pass.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return cuda_extension.gemm(a.contiguous(), b.contiguous(), False, None, c.contiguous(), mul=self.alpha)
