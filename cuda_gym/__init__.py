"""cuda_gym: Gymnasium environments in which LLM agents learn to write fast CUDA kernels."""

from __future__ import annotations

__version__ = "0.1.0"

from cuda_gym.errors import (  # noqa: E402
    BuildError,
    CudaGymError,
    DataNotFoundError,
    JudgeError,
    SandboxError,
    TaskError,
    ToolError,
)

__all__ = [
    "__version__",
    "BuildError",
    "CudaGymError",
    "DataNotFoundError",
    "JudgeError",
    "SandboxError",
    "TaskError",
    "ToolError",
]
