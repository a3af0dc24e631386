"""EnvSession: one kernel env driven by named tool calls, the episode engine every adapter shares."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from cuda_gym.errors import ConfigError, EpisodeOverError
from cuda_gym.tools import TOOLS, format_tool_call

logger = logging.getLogger(__name__)

DEFAULT_ENV_ID = "CudaKernel-Builtin-v0"
"""The env id an adapter plays when none is given (multi-turn, the built-in tasks, on a CUDA GPU)."""


@dataclass
class ToolStep:
    """What one tool call did.

    Attributes:
        text: the observation shown to the agent (the env's text, cut to its limits).
        reward: the env's reward of this step: 0 until the final judgement, then the terminal reward.
        done: the episode is over (``submit``, or the env's ``max_turns``-th call, judged).
        info: the env's flat ``info`` of the step (``tool``, ``parse_ok``, ``tool_ok``, the judge's facts...).
    """

    text: str
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def invalid(self) -> bool:
        """The call itself was wrong (unknown tool, bad arguments, a path the tools refuse): the agent's
        mistake, as opposed to a tool that ran and failed (a compile error, a failing check)."""
        if not self.info.get("parse_ok", True):
            return True
        return not self.info.get("tool_ok", True) and self.text.startswith("Error")


class EnvSession:
    """One episode at a time of a registered kernel env (``gym.make(env_id, **env_kwargs)``), driven by
    named tool calls instead of action text.

    Every adapter (TRL, OpenEnv, verl) plays its episodes through this class, so all of them run the
    env's own episode: the same prompt, tools, workspace, judge (and its executor) and terminal reward
    as ``gym.make``. ``env_kwargs`` go to ``gym.make`` unchanged (any ``KernelEnvConfig`` field, e.g.
    ``task_ids``, ``max_turns``, ``judge``, or the judge's ``executor``).

    The env is made on the first :meth:`start` (a constructor costs nothing) and kept for later
    episodes, so its judge, reference worker and build cache are reused. Calls are serialised by a
    lock: one session may be shared by threads, but it plays one call at a time.
    """

    def __init__(self, env_id: str = DEFAULT_ENV_ID, **env_kwargs: Any) -> None:
        if env_id not in gym.registry:
            import cuda_gym  # noqa: F401  (registers the ids)

            if env_id not in gym.registry:
                ids = ", ".join(sorted(k for k in gym.registry if "Kernel" in k))
                raise ConfigError(f"unknown env id {env_id!r}; cuda_gym registers: {ids}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs)
        self.env: Any = None
        """The ``gymnasium.Env`` (made on the first :meth:`start`)."""
        self.prompt = ""
        """The current episode's first observation (the task text)."""
        self.last: ToolStep | None = None
        """The last call's step, or ``None`` before the first call of an episode."""
        self.turns = 0
        self.started = False
        self.done = False
        self._lock = threading.RLock()

    # -- the episode ------------------------------------------------------------------------------

    def claimed(self) -> threading.RLock:
        """The session's lock (a context manager): every call holds it, so holding it keeps others out."""
        return self._lock

    def start(self, task_id: str | None = None, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode (on ``task_id``, else a task the env draws with ``seed``); return the
        prompt and the reset ``info`` (``task_id``, ``tools``, ``max_turns``...)."""
        with self._lock:
            if self.env is None:
                self.env = gym.make(self.env_id, disable_env_checker=True, **self.env_kwargs)
            options = {"task_id": str(task_id)} if task_id else None
            prompt, info = self.env.reset(seed=seed, options=options)
            self.prompt, self.last, self.turns = prompt, None, 0
            self.started, self.done = True, False
            return prompt, info

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolStep:
        """Run one tool call ``name(**arguments)`` through the env's ``step``.

        Raises:
            EpisodeOverError: no episode was started, or it is over (call :meth:`start`).
        """
        with self._lock:
            if not self.started or self.done:
                raise EpisodeOverError(
                    "the episode is over (submitted, or judged at its turn limit) or was never started: "
                    "start a new one (reset) before calling tools"
                )
            action = format_tool_call(name, dict(arguments or {}))
            text, reward, terminated, truncated, info = self.env.step(action)
            self.turns += 1
            self.done = bool(terminated or truncated)
            self.last = ToolStep(text, float(reward), self.done, dict(info))
            return self.last

    def finish(self) -> ToolStep:
        """The episode's final step: the one that ended it, or a ``submit`` made now (the env's final
        judgement of the workspace as it is) when the agent never submitted."""
        with self._lock:
            if self.done and self.last is not None:
                return self.last
            return self.call("submit")

    @property
    def reward(self) -> float | None:
        """The terminal reward once the episode is over, else ``None``."""
        return self.last.reward if self.done and self.last is not None else None

    @property
    def milestone(self) -> int | None:
        """The milestone (-1, 1, 2, 3) of the final judgement once the episode is over, else ``None``."""
        if not self.done or self.last is None or "milestone" not in self.last.info:
            return None
        return int(self.last.info["milestone"])

    @property
    def task_id(self) -> str | None:
        """The current episode's task id (``None`` before the first start)."""
        task = getattr(self.env.unwrapped, "task", None) if self.env is not None else None
        return task.id if task is not None else None

    @property
    def transcript(self) -> list[dict[str, str]]:
        """The episode so far as chat messages (``user`` prompt, then ``assistant`` call / ``tool`` text)."""
        return list(self.env.unwrapped.transcript) if self.env is not None else []

    def close(self) -> None:
        """Close the env: its workspace (unless ``keep_workspace``) and its judge's workers."""
        with self._lock:
            if self.env is not None:
                self.env.close()
            self.env = None
            self.started, self.done = False, True


def check_tool(name: str) -> None:
    """Raise ``ConfigError`` unless ``name`` is one of the env's tools."""
    if name not in TOOLS:
        raise ConfigError(f"unknown tool {name!r}; the tools are: {', '.join(TOOLS)}")
