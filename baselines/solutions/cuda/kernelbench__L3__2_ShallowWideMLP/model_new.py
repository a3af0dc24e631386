"""ModelNew for kernelbench/L3/2_ShallowWideMLP.

One cuBLAS SGEMM per layer with bias and ReLU fused in its epilogue.
"""
import torch
import torch.nn as nn

import cuda_extension

ACT_NONE, ACT_RELU, ACT_LEAKY_RELU, ACT_GELU, ACT_SIGMOID, ACT_SWISH = range(6)  # kernels/gemm.h


class ModelNew(nn.Module):
    """The reference's ``network`` (so its state_dict loads), run layer by layer with the fused GEMM."""

    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers = []
        current = input_size
        for size in hidden_layer_sizes:
            layers += [nn.Linear(current, size), nn.ReLU()]
            current = size
        layers.append(nn.Linear(current, output_size))
        self.network = nn.Sequential(*layers)
        self.linears = [m for m in self.network if isinstance(m, nn.Linear)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        last = len(self.linears) - 1
        for i, layer in enumerate(self.linears):
            x = cuda_extension.gemm(x, layer.weight, True, layer.bias, None, act=ACT_NONE if i == last else ACT_RELU)
        return x
