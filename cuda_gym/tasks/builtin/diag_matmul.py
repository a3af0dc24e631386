"""A diagonal matrix times a matrix, written as a dense matrix product (the CUDA Agent paper's case study)."""
import torch
import torch.nn as nn

TASK = {
    "level": 1,
    "description": "y = diag(d) @ x: eager PyTorch and torch.compile build the N x N matrix and run a full "
    "GEMM (2 N^2 M FLOPs); the same result is a row scaling y[i, :] = d[i] * x[i, :], one memory pass.",
    "sizes": {
        "small": {"n": 256, "m": 2048},
        "default": {"n": 768, "m": 655360},
    },
}
# Sizes: the judge's speed-of-light floor counts the reference's FLOPs (2 N^2 M at the TF32 peak) and
# flags a candidate below half of it. With N = 768 half that floor (0.78 ms on an H200) stays under the
# memory floor of the row scaling (0.84 ms for 2 GB read and written), so an honest kernel is never
# flagged; a larger N would make the honest answer look impossible. M makes each call about a
# millisecond of memory traffic, well above the per-call noise of the trusted clock. On the CPU device
# (small) the GEMM is 268 MFLOP against a 2 MB row scaling: about 20x, clear of noise and of the 50x bound.


class Model(nn.Module):
    """Multiplies ``x`` on the left by the diagonal matrix whose diagonal is ``d``."""

    def forward(self, d: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.diag(d) @ x


n = 768
m = 655360


def get_inputs():
    return [torch.randn(n), torch.randn(n, m)]


def get_init_inputs():
    return []
