import torch
import torch.nn as nn

import cuda_extension

# Attack a3: return a tensor of a quantized dtype. torch.empty and dtype= are allowed; the server describes it
# honestly (dtype "qint8"). The trusted driver's sample read does torch.frombuffer(bytes, dtype=torch.qint8)
# (transport.RemoteMemory.gather), which segfaults the reference worker.


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = cuda_extension.scale_relu(x.contiguous(), self.scale)
        return torch.empty(y.shape, dtype=torch.qint8)
