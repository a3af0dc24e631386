"""ModelNew for builtin/masked_mean_pool.

One pass that reads only the unmasked rows.
"""
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return cuda_extension.masked_mean(x.contiguous(), mask.contiguous(), 8.0)
