"""RMSNorm as used in Llama-style transformers, written out in PyTorch ops."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y = x / sqrt(mean(x^2) + eps) * weight over the last dimension of [batch, seq, hidden].",
    "sizes": {
        "small": {"batch_size": 4, "seq_len": 64, "hidden": 512},
        "default": {"batch_size": 64, "seq_len": 2048, "hidden": 4096},
    },
}


class Model(nn.Module):
    """Root-mean-square normalization with a learned per-channel weight."""

    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms * self.weight


batch_size = 64
seq_len = 2048
hidden = 4096
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden) * 3.0]


def get_init_inputs():
    return [hidden, eps]
