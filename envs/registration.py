"""Registration of every cuda_gym env id with Gymnasium (``import cuda_gym`` runs it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from cuda_gym.envs.config import KernelEnvConfig

MULTI_TURN = "cuda_gym.envs.kernel_env:KernelEnv"
SINGLE_TURN = "cuda_gym.envs.single_turn:SingleTurnKernelEnv"
DEFAULT_MAX_TURNS: int = KernelEnvConfig.max_turns
"""``max_episode_steps`` of the multi-turn ids: the default ``max_turns`` (200)."""


@dataclass(frozen=True)
class EnvIdSpec:
    """One registered id: its name, task set settings and device."""

    name: str
    """The id's middle part: ``L1`` in ``CudaKernel-L1-v0``."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Settings of :class:`~cuda_gym.envs.KernelEnvConfig` the id fixes (overridable in ``gym.make``)."""


CUDA_IDS = (
    EnvIdSpec("L1", {"source": "kernelbench", "level": 1}),
    EnvIdSpec("L2", {"source": "kernelbench", "level": 2}),
    EnvIdSpec("L3", {"source": "kernelbench", "level": 3}),
    EnvIdSpec("L4", {"source": "kernelbench", "level": 4}),
    EnvIdSpec("Ops6K", {"source": "ops6k"}),
    EnvIdSpec("Builtin", {"source": "builtin", "size": "default"}),
)
"""Task sets of the ``CudaKernel-*`` and ``CudaKernelSingleTurn-*`` ids (device ``cuda``)."""

CPU_IDS = (EnvIdSpec("Builtin", {"source": "builtin", "size": "small"}),)
"""Task sets of the ``CpuKernel-*`` and ``CpuKernelSingleTurn-*`` ids (device ``cpu``)."""


def _id_entries() -> Iterator[tuple[str, str, int | None, dict[str, Any]]]:
    """(id, entry point, ``max_episode_steps``, kwargs) of every id, in registration order."""
    for prefix, device, specs in (("CudaKernel", "cuda", CUDA_IDS), ("CpuKernel", "cpu", CPU_IDS)):
        for spec in specs:
            kwargs = dict(spec.kwargs, device=device)
            yield f"{prefix}-{spec.name}-v0", MULTI_TURN, DEFAULT_MAX_TURNS, kwargs
            yield f"{prefix}SingleTurn-{spec.name}-v0", SINGLE_TURN, None, kwargs


def env_ids() -> list[str]:
    """Every id :func:`register_envs` registers."""
    return [env_id for env_id, *_ in _id_entries()]


def register_envs() -> None:
    """Register every id (idempotent: ids already registered are left alone).

    All ids are ``nondeterministic=True``: the judge's timings (and so speedups and rewards near a
    threshold) vary between runs. Multi-turn ids get ``max_episode_steps=200`` (the default
    ``max_turns``) as a safety net only: the env ends and scores the episode itself after
    ``max_turns`` calls (single-turn ids end after their one step and get no time limit).
    When you raise ``max_turns`` above 200, raise ``max_episode_steps`` too
    (``gym.make(id, max_turns=500, max_episode_steps=500)``).
    """
    for env_id, entry_point, steps, kwargs in _id_entries():
        if env_id in gym.registry:
            continue
        gym.register(
            id=env_id,
            entry_point=entry_point,
            nondeterministic=True,
            max_episode_steps=steps,
            kwargs=kwargs,
        )
