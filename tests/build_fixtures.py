"""Reusable build fixtures: small real kernels and session-scoped compiled workspaces.

``tests/conftest.py`` registers the fixtures once for every test module (import only the plain
helpers into a module: importing a fixture there would make that module its own copy, with its own
build cache); they share one build cache per test session, so each extension compiles once however
many modules use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cuda_gym.build import BuildConfig, BuildResult, build_workspace
from cuda_gym.tasks.task import Task
from cuda_gym.workspace import Workspace

ADD_TASK_CODE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(1024), torch.randn(1024)]


def get_init_inputs():
    return [1.0]
'''

ADD_CU = """#include <cuda_runtime.h>

__global__ void add_kernel(const float* a, const float* b, float* out, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

void add_launch(const float* a, const float* b, float* out, long n, cudaStream_t stream) {
  long blocks = (n + 255) / 256;
  add_kernel<<<blocks, 256, 0, stream>>>(a, b, out, n);
}
"""

ADD_BINDING_CUDA = """#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include "../binding_registry.h"

void add_launch(const float* a, const float* b, float* out, long n, cudaStream_t stream);

torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda(), "add: expected CUDA tensors");
  a = a.contiguous();
  b = b.contiguous();
  auto out = torch::empty_like(a);
  add_launch(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), a.numel(),
             at::cuda::getCurrentCUDAStream());
  return out;
}

static void bind_add(pybind11::module_& m) { m.def("add_forward", &add_forward, "out = a + b"); }
REGISTER_BINDING(add, bind_add);
"""

ADD_CPP = """#include <cstdint>

void add_cpu(const float* a, const float* b, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
"""

ADD_BINDING_CPU = """#include <torch/extension.h>
#include "../binding_registry.h"

void add_cpu(const float* a, const float* b, float* out, int64_t n);

torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.device().is_cpu() && a.scalar_type() == torch::kFloat, "add: expected float CPU tensors");
  a = a.contiguous();
  b = b.contiguous();
  auto out = torch::empty_like(a);
  add_cpu(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), a.numel());
  return out;
}

static void bind_add(pybind11::module_& m) { m.def("add_forward", &add_forward, "out = a + b"); }
REGISTER_BINDING(add, bind_add);
"""

MODEL_NEW_ADD = '''import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale

    def forward(self, a, b):
        return cuda_extension.add_forward(a, b)
'''


def add_task() -> Task:
    """A tiny element-wise add task (no data set needed)."""
    return Task(id="test/add", source="custom", level=1, name="add", code=ADD_TASK_CODE)


def write_add_kernels(ws: Workspace) -> None:
    """Write the add kernel, its binding and ``model_new.py`` for the workspace's flavour."""
    kernels = ws.root / "kernels"
    if ws.flavour == "cuda":
        (kernels / "add.cu").write_text(ADD_CU)
        (kernels / "add_binding.cpp").write_text(ADD_BINDING_CUDA)
    else:
        (kernels / "add.cpp").write_text(ADD_CPP)
        (kernels / "add_binding.cpp").write_text(ADD_BINDING_CPU)
    (ws.root / "model_new.py").write_text(MODEL_NEW_ADD)


@dataclass
class BuiltWorkspace:
    """A workspace with the add kernels and the result of building it."""

    ws: Workspace
    result: BuildResult
    config: BuildConfig


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache (with its precompiled header) for the whole test session."""
    return tmp_path_factory.mktemp("build_cache")


@pytest.fixture(scope="session")
def build_config(build_cache: Path) -> BuildConfig:
    """A :class:`BuildConfig` using the session cache and arch 9.0 (no GPU needed to compile)."""
    return BuildConfig(arch="9.0", cache_dir=build_cache, timeout_s=900)


def _built(flavour: str, config: BuildConfig, parent: Path) -> BuiltWorkspace:
    ws = Workspace.create(add_task(), flavour=flavour, parent=parent)
    write_add_kernels(ws)
    result = build_workspace(ws, config)
    assert result.ok, f"the add workspace ({flavour}) failed to build:\n{result.log}"
    return BuiltWorkspace(ws, result, config)


@pytest.fixture(scope="session")
def cuda_add_build(build_config: BuildConfig, tmp_path_factory: pytest.TempPathFactory) -> BuiltWorkspace:
    """A CUDA workspace with an element-wise add kernel, built once per session."""
    return _built("cuda", build_config, tmp_path_factory.mktemp("cuda_add"))


@pytest.fixture(scope="session")
def cpu_add_build(build_config: BuildConfig, tmp_path_factory: pytest.TempPathFactory) -> BuiltWorkspace:
    """A CPU workspace with an OpenMP add kernel, built once per session."""
    return _built("cpu", build_config, tmp_path_factory.mktemp("cpu_add"))
