import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x):
        y = cuda_extension.scale_relu(x.contiguous(), self.scale)
        return y.half().float()
