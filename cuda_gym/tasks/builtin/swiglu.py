"""SwiGLU gating: SiLU of one half times the other half."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TASK = {
    "level": 1,
    "description": "y = silu(x[..., :H]) * x[..., H:]: the gate of Llama-style MLPs, a strided elementwise op.",
    "sizes": {
        "small": {"tokens": 128, "hidden": 256},
        "default": {"tokens": 32768, "hidden": 8192},
    },
}


class Model(nn.Module):
    """Splits the last dimension in two halves and gates the second with SiLU of the first."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return F.silu(gate) * up


tokens = 32768
hidden = 8192


def get_inputs():
    return [torch.randn(tokens, 2 * hidden)]


def get_init_inputs():
    return []
