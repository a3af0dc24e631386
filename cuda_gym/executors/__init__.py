"""Where judge jobs run: inline (today's behaviour), a local GPU pool, or a Ray cluster.

One interface (``Executor``): ``submit(JudgeJob) -> Future[JudgeResult]``, ``close()``, a context
manager. Envs pick one with ``executor=`` (or ``CUDA_GYM_EXECUTOR``): see ``docs/executors.md``.
"""

from __future__ import annotations

from typing import Any

from cuda_gym.executors.base import Executor
from cuda_gym.executors.config import EXECUTOR_ENV, ExecutorConfig
from cuda_gym.executors.inline import InlineExecutor
from cuda_gym.executors.job import JudgeJob
from cuda_gym.executors.pool import LocalGPUPool
from cuda_gym.executors.shared import PoolClient, PoolServer, make_executor, shared_executor, shutdown_executors

__all__ = [
    "EXECUTOR_ENV",
    "Executor",
    "ExecutorConfig",
    "InlineExecutor",
    "JudgeJob",
    "LocalGPUPool",
    "PoolClient",
    "PoolServer",
    "RayExecutor",
    "make_executor",
    "shared_executor",
    "shutdown_executors",
]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":  # imports ray only when asked for
        from cuda_gym.executors.ray_executor import RayExecutor

        return RayExecutor
    raise AttributeError(name)
