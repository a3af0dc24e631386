"""KernelEnvConfig: every setting of a kernel env, shared by the constructor and ``gym.make`` kwargs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_gym.errors import ConfigError
from cuda_gym.reward import DEFAULT_THRESHOLD, REWARDS, RewardFn
from cuda_gym.vocab import Flavour, Size, check_device, check_size, flavour_of

__all__ = ["REWARDS", "ConfigError", "KernelEnvConfig"]  # ConfigError itself lives in cuda_gym.errors


@dataclass
class KernelEnvConfig:
    """Configuration of :class:`~cuda_gym.envs.KernelEnv` and :class:`~cuda_gym.envs.SingleTurnKernelEnv`.

    Every field is also a keyword of the env constructors and of ``gym.make(id, **kwargs)``.
    """

    source: str = "builtin"
    """Task set: ``builtin``, ``kernelbench``, ``ops6k`` or ``custom`` (custom needs ``data_path``)."""

    level: int | None = None
    """KernelBench level to draw tasks from (1-4); ``None`` keeps every level of the source."""

    data_path: str | Path | None = None
    """Where the task set lives (a folder or file); ``None`` searches ``CUDA_GYM_DATA_DIR`` and the cache."""

    size: Size = "default"
    """Problem size of builtin tasks: ``small`` (fast on a CPU) or ``default`` (GPU-sized)."""

    task_ids: Sequence[str] | None = None
    """Restrict episodes to these task ids (in this order of preference for ``reset``'s draw)."""

    task_filter: str | Path | None = None
    """A validation report (the JSONL of ``cuda-gym tasks validate``): keep only the tasks it passed,
    with the code it validated (tasks it lacks, failed or saw with other code are left out)."""

    device: str = "cuda"
    """``cuda`` / ``cuda:N`` (the agent writes CUDA) or ``cpu`` (the agent writes C++); sets the flavour."""

    judge: Any = None
    """Judge settings: a ``JudgeConfig``, a dict of its fields, or a ready judge object with
    ``verify/profile/submit(ws)`` (shared, not closed by the env). ``None`` uses the defaults."""

    executor: Any = None
    """Where judge jobs run: ``inline`` (this env's own judge, in its thread), ``local`` (one timing lane
    per GPU of the machine, shared by every env of the process and of a vector env's subprocesses),
    ``ray`` (GPU actors on a Ray cluster), a dict of ``cuda_gym.executors.ExecutorConfig`` fields, or an
    ``Executor`` (shared, not closed by the env). ``None`` reads ``CUDA_GYM_EXECUTOR`` (default ``inline``).
    Ignored when ``judge`` is a ready judge object."""

    reward: str | RewardFn = "milestone"
    """Terminal reward: a name in ``REWARDS`` or a picklable function ``JudgeResult -> float``."""

    reward_threshold: float = DEFAULT_THRESHOLD
    """Speedup a milestone must beat (``milestone`` reward only): 1.05 means more than 5% faster."""

    max_turns: int = 200
    """Tool calls per episode; the last one is followed by the final judgement (``truncated=True``)."""

    observation_max_length: int = 65536
    """``max_length`` of the observation space: observations are cut in the middle to fit."""

    action_max_length: int = 262144
    """``max_length`` of the action space (longer actions are still accepted and parsed)."""

    tool_output_limit: int = 16384
    """Characters of one tool's output shown to the agent (cut in the middle)."""

    keep_workspace: bool = False
    """Keep each episode's directory on disk after the episode (for inspection)."""

    workspace_dir: str | Path | None = None
    """Parent folder of episode directories; ``None`` uses the system temp folder."""

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ConfigError(f"max_turns must be >= 1, got {self.max_turns}")
        if isinstance(self.reward, str) and self.reward not in REWARDS:
            raise ConfigError(f"unknown reward {self.reward!r}: use one of {', '.join(REWARDS)} or a function")
        if not self.reward_threshold > 0:
            raise ConfigError(f"reward_threshold must be positive (1.05: more than 5% faster), got {self.reward_threshold}")
        check_size(self.size)
        check_device(self.device)
        if self.executor is not None and not hasattr(self.executor, "submit"):
            from cuda_gym.executors.config import ExecutorConfig

            ExecutorConfig.resolve(self.executor)  # a bad kind or key is a ConfigError now, not at the first judgement
        if self.observation_max_length < 1024:
            raise ConfigError("observation_max_length must be >= 1024 so tool outputs fit")
        self.tool_output_limit = min(self.tool_output_limit, self.observation_max_length)
        if isinstance(self.task_ids, str):
            self.task_ids = [self.task_ids]

    @property
    def flavour(self) -> Flavour:
        """Workspace flavour that follows the device: ``cuda`` or ``cpu``."""
        return flavour_of(self.device)

    @classmethod
    def build(cls, config: KernelEnvConfig | Mapping[str, Any] | None = None, **overrides: Any) -> KernelEnvConfig:
        """A config from an instance or a dict, with keyword overrides; unknown keys are an error."""
        if config is None:
            base: dict[str, Any] = {}
        elif isinstance(config, KernelEnvConfig):
            base = {f.name: getattr(config, f.name) for f in dataclasses.fields(cls)}
        else:
            base = dict(config)
        base.update(overrides)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(base) - known)
        if unknown:
            raise ConfigError(
                f"unknown env setting(s) {', '.join(unknown)}; valid settings: {', '.join(sorted(known))}"
            )
        return cls(**base)
