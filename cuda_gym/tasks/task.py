"""The Task: one KernelBench-style reference program, parsed but not run until asked."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class LoadedTask:
    """What executing a task's code yields: the reference model class and its input factories."""

    Model: type
    get_inputs: Callable[[], list[Any]]
    get_init_inputs: Callable[[], list[Any]]
    namespace: dict[str, Any]


@dataclass(frozen=True)
class Task:
    """One task: a KernelBench-style reference program.

    Attributes:
        id: stable id such as ``kernelbench/L2/17_Conv2d_InstanceNorm_Divide``, ``ops6k/00042`` or
            ``builtin/fused_bias_gelu``.
        source: the task set it came from (``builtin``, ``kernelbench``, ``ops6k``, ``custom``).
        level: KernelBench level (1-4); Ops-6K tasks use 2 (fused operators) unless known otherwise.
        name: human-readable name (KernelBench file name without ``.py``).
        code: the full program text defining ``Model``, ``get_inputs`` and ``get_init_inputs``.
        meta: free-form facts (``data_source``, ``ops``, ``size``, ``problem_id``...), JSON-serialisable.
    """

    id: str
    source: str
    level: int
    name: str
    code: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def code_hash(self) -> str:
        """SHA-256 of the code: the key of every per-task cache (baselines, judgements)."""
        return hashlib.sha256(self.code.encode()).hexdigest()
