import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Square matmul through cuBLAS SGEMM (GEMM is the one cuBLAS use the rules allow)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return cuda_extension.matmul_cublas(A.contiguous(), B.contiguous())
