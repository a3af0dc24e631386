"""GEMM with a bias and ReLU epilogue."""
import torch
import torch.nn as nn

TASK = {
    "level": 2,
    "description": "y = relu(x @ W^T + b): a square-ish GEMM whose epilogue can be fused.",
    "sizes": {
        "small": {"batch_size": 64, "in_features": 256, "out_features": 256},
        "default": {"batch_size": 8192, "in_features": 4096, "out_features": 4096},
    },
}


class Model(nn.Module):
    """A linear layer followed by ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


batch_size = 8192
in_features = 4096
out_features = 4096


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
