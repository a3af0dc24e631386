import torch
import torch.nn as nn

import cuda_extension

# Attack a3b: a bits8 output: gather and the full copy work, check_samples (driver._early, called outside the
# try/except of ServerSession.call) raises NotImplementedError on indexing a bits8 tensor -> JudgeError.


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = cuda_extension.scale_relu(x.contiguous(), self.scale)
        return torch.empty(y.shape, dtype=torch.bits8)
