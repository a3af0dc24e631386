"""cuda_gym: Gymnasium environments in which LLM agents learn to write fast CUDA kernels."""

from __future__ import annotations

__version__ = "0.1.0"

from cuda_gym.errors import (  # noqa: E402
    BuildError,
    ConfigError,
    CudaGymError,
    DataNotFoundError,
    EpisodeOverError,
    JudgeError,
    SandboxError,
    SolutionFormatError,
    TaskError,
    ToolError,
)

__all__ = [
    "__version__",
    "BuildError",
    "ConfigError",
    "CudaGymError",
    "DataNotFoundError",
    "EpisodeOverError",
    "JudgeError",
    "SandboxError",
    "SolutionFormatError",
    "TaskError",
    "ToolError",
]

# Gymnasium has no plugin discovery: importing cuda_gym registers its env ids.
from cuda_gym.envs.registration import register_envs  # noqa: E402

register_envs()
