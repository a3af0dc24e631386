import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """cuBLAS GEMM plus one fused bias, multiply and LeakyReLU pass.

    ``self.gemm`` only holds the weights (so the reference state_dict loads); it is never called.
    """

    def __init__(self, in_features: int, out_features: int, multiplier: float, negative_slope: float):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = float(multiplier)
        self.negative_slope = float(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.linear_mul_leaky(
            x.contiguous(), self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope
        )
