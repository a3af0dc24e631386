"""The agent interface: an agent reads observations and ``info`` and answers with action text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym


@runtime_checkable
class Agent(Protocol):
    """What every agent of ``cuda_gym.baselines`` implements (scripted, HTTP, local model...).

    ``reset(obs, info)`` starts an episode with the env's first observation and ``info``;
    ``act(obs, info)`` returns the next action: one tool call as text (multi-turn envs) or a
    whole solution (single-turn envs), given the latest observation and ``info``.
    """

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        """Start an episode: ``obs`` and ``info`` are what ``env.reset`` returned."""
        ...

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """The next action for observation ``obs`` (and its ``info``)."""
        ...


@dataclass
class Episode:
    """What one episode produced.

    Attributes:
        reward: the sum of the step rewards (the terminal reward in the kernel envs).
        steps: actions taken.
        info: ``info`` of the last step (the judge's facts on a judged step).
        terminated, truncated: how it ended (both False when ``max_steps`` stopped it).
    """

    reward: float = 0.0
    steps: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    terminated: bool = False
    truncated: bool = False


def run_episode(
    env: gym.Env[str, str],
    agent: Agent,
    *,
    seed: int | None = None,
    options: dict[str, Any] | None = None,
    max_steps: int | None = None,
    on_step: Callable[[str, str], None] | None = None,
) -> Episode:
    """Play one episode of ``agent`` in ``env`` until it terminates, is truncated, or ``max_steps``.

    ``on_step(action, observation)`` is called after the reset (with action ``""``) and after
    every step, e.g. to print the transcript.
    """
    obs, info = env.reset(seed=seed, options=options)
    agent.reset(obs, info)
    if on_step is not None:
        on_step("", obs)
    episode = Episode(info=dict(info))
    while max_steps is None or episode.steps < max_steps:
        action = agent.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        episode.steps += 1
        episode.reward += float(reward)
        episode.info = dict(info)
        if on_step is not None:
            on_step(action, obs)
        if terminated or truncated:
            episode.terminated, episode.truncated = bool(terminated), bool(truncated)
            break
    return episode
