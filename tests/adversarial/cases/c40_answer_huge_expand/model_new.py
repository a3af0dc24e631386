import torch
import torch.nn as nn

import cuda_extension

# Attack a1: the output is a stride-0 view of ONE computed element, with a huge shape.
# The server's Reply is honest about it (shape (N,), stride (0,)); the driver reads 4 bytes and then
# materialises N * 4 bytes of its own memory (RemoteMemory.read_tensor -> view(...).clone()) before
# it ever compares the shape with the reference's.
N = 1 << 28  # 1 GiB in the driver per copy (refused unread now: more than the task's outputs may take)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = cuda_extension.scale_relu(x.contiguous(), self.scale)
        return y.reshape(-1)[:1].expand(N)
