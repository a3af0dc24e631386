"""ModelNew for builtin/groupnorm_silu.

One block per (sample, group): statistics, affine and SiLU.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.groupnorm_silu(x.contiguous(), self.norm.weight, self.norm.bias, self.norm.num_groups,
                                             self.norm.eps)
