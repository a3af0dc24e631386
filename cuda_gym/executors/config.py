"""ExecutorConfig: which executor judges an env's jobs and how it is laid out."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cuda_gym.errors import ConfigError
from cuda_gym.vocab import ExecutorKind, check_device, check_executor

EXECUTOR_ENV = "CUDA_GYM_EXECUTOR"
"""Environment variable naming the executor kind when an env is not given ``executor=``."""


@dataclass
class ExecutorConfig:
    """How judge jobs run. Every field is also a key of the env's ``executor=`` dict."""

    kind: ExecutorKind = "inline"
    """``inline`` (the caller's thread, one judge per env: the default), ``local`` (one timing lane per GPU
    of this machine, shared by every env of the process tree) or ``ray`` (GPU actors on a Ray cluster)."""

    devices: Sequence[str] | None = None
    """The lanes' devices (``cuda:N`` or ``cpu``); ``None``: every visible GPU, or ``lanes`` CPU lanes
    when the judge's device is ``cpu``."""

    lanes: int = 1
    """CPU lanes when ``devices`` is ``None`` and the device is ``cpu`` (CI and laptops). CPU lanes share the
    machine's cores, so more than one time jobs against each other: for exercising the pool only."""

    warm_servers: int = 2
    """Candidate servers each lane keeps started ahead (``JudgeConfig.warm_servers``); 0 disables."""

    build_workers: int | None = None
    """Threads that build submissions ahead of timing; ``None``: the CPU count."""

    address: str | None = None
    """Ray: the cluster's address (``ray.init(address=...)``); ``None`` starts or joins a local one."""

    max_in_flight: int | None = None
    """Ray: jobs submitted to the actors at once (back-pressure); ``None``: 2 per actor."""

    max_restarts: int = 3
    """Ray: restarts of a GPU actor that died (its jobs are retried on another actor or fail)."""

    job_retries: int = 1
    """Ray: how often a job whose actor or node died is submitted again before it fails."""

    def __post_init__(self) -> None:
        self.kind = check_executor(self.kind)
        if self.devices is not None:
            if isinstance(self.devices, str):
                self.devices = [d.strip() for d in self.devices.split(",") if d.strip()]
            self.devices = [check_device(d, "an executor device") for d in self.devices]
            if not self.devices:
                raise ConfigError("devices must name at least one device, or be None for every visible GPU")
        for name in ("lanes", "max_restarts", "job_retries", "warm_servers"):
            if getattr(self, name) < 0 or (name == "lanes" and self.lanes < 1):
                raise ConfigError(f"{name} must be >= {1 if name == 'lanes' else 0}, got {getattr(self, name)}")

    @classmethod
    def resolve(cls, value: Any = None) -> ExecutorConfig:
        """A config from an env's ``executor=`` value: ``None`` (``CUDA_GYM_EXECUTOR``, else ``inline``),
        a kind name, a dict of fields or a config; a bad value is a ``ConfigError`` naming the valid ones."""
        if isinstance(value, ExecutorConfig):
            return value
        if value is None:
            value = os.environ.get(EXECUTOR_ENV) or "inline"
            if isinstance(value, str):
                return cls(kind=check_executor(value.strip(), f"{EXECUTOR_ENV}"))
        if isinstance(value, str):
            return cls(kind=check_executor(value))
        if isinstance(value, Mapping):
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(value) - names)
            if unknown:
                raise ConfigError(f"unknown executor setting(s) {unknown}; valid settings: {sorted(names)}")
            return cls(**dict(value))
        raise ConfigError(
            f"executor must be 'inline', 'local', 'ray', a dict of ExecutorConfig fields or an Executor, "
            f"got {type(value).__name__}"
        )
