"""A three-layer perceptron with GELU activations."""
import torch
import torch.nn as nn

TASK = {
    "level": 3,
    "description": "Linear -> GELU -> Linear -> GELU -> Linear: a small MLP block (three GEMMs, two epilogues).",
    "sizes": {
        "small": {"batch_size": 32, "in_features": 128, "hidden": 256, "out_features": 64},
        "default": {"batch_size": 4096, "in_features": 2048, "hidden": 8192, "out_features": 2048},
    },
}


class Model(nn.Module):
    """Three linear layers with GELU between them."""

    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
            nn.Linear(hidden, out_features),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x) * 10.0


batch_size = 4096
in_features = 2048
hidden = 8192
out_features = 2048


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
