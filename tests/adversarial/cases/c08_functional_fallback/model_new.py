import torch.nn.functional as F

import torch
import torch.nn as nn

import cuda_extension

act = F.relu


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = float(scale)

    def forward(self, x):
        return act(x * self.scale)
