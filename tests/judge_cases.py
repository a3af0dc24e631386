"""Single-file submissions shared by the judge tests (CPU C++ via load_inline, and CUDA for GPU tests)."""

from __future__ import annotations

from cuda_gym.tasks import get_task
from cuda_gym.tasks.task import Task

TASK_ID = "builtin/fused_bias_gelu"


def small_task() -> Task:
    """The task every submission here solves, at its small size (the judge tests' ``task`` fixture)."""
    return get_task(TASK_ID, size="small")

CPU_EXTENSION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor fused_bias_gelu(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.is_contiguous() && bias.is_contiguous(), "contiguous inputs expected");
    auto out = torch::empty_like(x);
    const float* px = x.data_ptr<float>();
    const float* pb = bias.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t cols = bias.numel();
    const int64_t n = x.numel();
    for (int64_t i = 0; i < n; ++i) {
        const float v = px[i] + pb[i % cols];
        po[i] = static_cast<float>(scale) * 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
    return out;
}

torch::Tensor alloc_only(torch::Tensor x) {
    return torch::empty_like(x);
}
"""

ext = load_inline(name="cuda_gym_judge_test_gelu", cpp_sources=CPP, functions=["fused_bias_gelu", "alloc_only"])
'''

MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
{body}
'''


def cpu_solution(body: str, prelude: str = "") -> str:
    """A KernelBench-style file around the shared C++ extension; ``body`` is forward's indented code."""
    return CPU_EXTENSION + prelude + MODEL.format(body=body)


HONEST = cpu_solution("        return ext.fused_bias_gelu(x, self.bias, 1.0)")
WRONG = cpu_solution("        return ext.fused_bias_gelu(x, self.bias, 1.5)")
EMPTY = cpu_solution("        return ext.alloc_only(x)")
EXCEPTION = cpu_solution("        raise RuntimeError('boom in forward')")
CRASH = cpu_solution("        import os\n        os.abort()")
MUTATES = cpu_solution("        out = ext.fused_bias_gelu(x, self.bias, 1.0)\n        x.zero_()\n        return out")
THREAD = cpu_solution(
    "        import threading\n        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
    "        return ext.fused_bias_gelu(x, self.bias, 1.0)",
    prelude="import time\n",
)
FORK = cpu_solution(
    "        import os, time\n        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
    "        return ext.fused_bias_gelu(x, self.bias, 1.0)",
)
DEEP_FOLDERS = cpu_solution(
    "        import os\n        fd = os.open('.', os.O_RDONLY)\n        for _ in range(3000):\n"
    "            os.mkdir('d', dir_fd=fd)\n            nfd = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
    "            os.close(fd)\n            fd = nfd\n        os.close(fd)\n"
    "        return ext.fused_bias_gelu(x, self.bias, 1.0)",
)
"""Leaves a chain of 3000 folders in the server's writable folder (its first call; later ones fail, which
does not matter): Python 3.11's ``shutil.rmtree`` raised ``RecursionError`` removing it (red team 3)."""
MANY_FILES = cpu_solution(
    "        import os, time\n        top = f'c{time.monotonic_ns()}'\n        os.mkdir(top)\n"
    "        for i in range(30000):\n            os.mkdir(f'{top}/d{i}')\n"
    "        return ext.fused_bias_gelu(x, self.bias, 1.0)",
)
"""Adds 30,000 folders to the server's writable folder in every call: past the server's entries bound."""
MANY_OUTPUTS = cpu_solution(
    "        out = ext.fused_bias_gelu(x, self.bias, 1.0)\n        return tuple(out[i:i + 1, :1] for i in range(64))",
)
"""Answers 64 one-element tensors where the reference returns one (a hostile answer of 80,000 would make the
driver pin and read each)."""
NO_MODEL = CPU_EXTENSION + "\nclass Something:\n    pass\n"
SYNTAX_ERROR = "import torch\nclass ModelNew(torch.nn.Module:\n    pass\n"

HANG = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        while True:
            pass
'''

CUDA_HONEST = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_gelu_kernel(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y,
                                 long n, long cols, float scale, long offset) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] + b[i % cols];
        y[i + offset] = scale * 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

torch::Tensor fused_bias_gelu(torch::Tensor x, torch::Tensor bias, double scale, long offset) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    bias_gelu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), n,
                                          bias.numel(), (float)scale, offset);
    return y;
}
"""
CPP = "torch::Tensor fused_bias_gelu(torch::Tensor x, torch::Tensor bias, double scale, long offset);"

ext = load_inline(name="cuda_gym_judge_test_gelu_cuda", cpp_sources=CPP, cuda_sources=CUDA, functions=["fused_bias_gelu"])


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return ext.fused_bias_gelu(x, self.bias, SCALE, OFFSET)
'''

CUDA_OK = CUDA_HONEST + "\nSCALE = 1.0\nOFFSET = 0\n"
CUDA_WRONG = CUDA_HONEST + "\nSCALE = 1.5\nOFFSET = 0\n"
CUDA_ILLEGAL_ADDRESS = CUDA_HONEST + "\nSCALE = 1.0\nOFFSET = 1 << 40\n"
CUDA_HOGS_MEMORY = CUDA_OK.replace(
    "        return ext.fused_bias_gelu(x, self.bias, SCALE, OFFSET)",
    "        out = ext.fused_bias_gelu(x, self.bias, SCALE, OFFSET)\n"
    "        free, _ = torch.cuda.mem_get_info()\n"
    "        hog = torch.empty(max(free - (64 << 20), 1), dtype=torch.uint8, device='cuda')\n"
    "        self.hogs = getattr(self, 'hogs', []) + [hog]\n"
    "        return out",
)
"""After each call, holds all of the GPU's free memory but 64 MiB: the next allocation of the driver's (or its own)
fails."""

TORCH_FALLBACK = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        return F.gelu(x + self.bias, approximate="tanh")
'''
