"""Mean over the sequence of token embeddings, counting only unmasked tokens."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y[b] = sum_t m[b,t] x[b,t] / sum_t m[b,t]: a masked reduction over the sequence axis.",
    "sizes": {
        "small": {"batch_size": 8, "seq_len": 64, "hidden": 128},
        "default": {"batch_size": 256, "seq_len": 2048, "hidden": 2048},
    },
}


class Model(nn.Module):
    """Masked mean pooling of [batch, seq, hidden] embeddings with a float 0/1 mask [batch, seq]."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weights = mask.unsqueeze(-1)
        return (x * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0) * 8.0


batch_size = 256
seq_len = 2048
hidden = 2048


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden), (torch.rand(batch_size, seq_len) < 0.1).float()]


def get_init_inputs():
    return []
