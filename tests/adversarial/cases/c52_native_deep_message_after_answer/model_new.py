# Case c52 (red team 2, d2): after each real call's answer, 20,000 '[' where the driver expects `Finished`.
# json.loads raised RecursionError, which the driver's read of `Finished` did not catch: a JudgeError (the
# judge's failure) instead of this submission's -1.
import sys

import torch
import torch.nn as nn

import cuda_extension


def _patch():
    server = sys.modules["__main__"].Server
    call = server.call

    def patched(self, msg, fds, received=0.0):
        reply, send, pending = call(self, msg, fds, received)
        if not msg.noop:
            self.channel.send(reply, send)
            self.channel.sock.send(b"[" * 20000)
        return reply, send, pending

    server.call = patched


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = float(scale)
        _patch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.scale_relu(x.contiguous(), self.scale)
