"""ModelNew for builtin/transpose_add.

X + z^T in 32 x 32 blocks.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return cuda_extension.transpose_add(x.contiguous(), z.contiguous())
