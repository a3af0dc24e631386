"""ModelNew for builtin/diag_matmul: a row scaling kernel instead of building diag(d) and running a GEMM."""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, d: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.diag_scale(d.contiguous(), x.contiguous())
