"""RecordTrajectories: one JSON line per episode (prompt, actions, observations, rewards, verdict)."""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs


def _scalar(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item"):  # numpy scalars
        try:
            return _scalar(value.item())
        except (TypeError, ValueError):
            return None
    return None


def _flat(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON-friendly scalars of an info dict (NaN/inf become null; lists and dicts are left out)."""
    out = {}
    for key, value in info.items():
        if isinstance(value, (dict, list, tuple)):
            continue
        out[key] = _scalar(value)
    return out


class RecordTrajectories(gym.Wrapper[Any, Any, Any, Any], RecordConstructorArgs):
    """Appends every episode to a JSONL file: the input of rejection fine-tuning and of analysis.

    One line per episode, written (under a file lock, then flushed and fsync'ed) when the episode
    ends, when the next ``reset`` abandons it, or at ``close``, so a crash loses at most the episode
    in flight. Keys: ``env_id``, ``task_id``, ``seed``, ``prompt``, ``tools`` (the OpenAI schemas,
    when ``include_tools``), ``steps`` (``action``, ``observation``, ``reward``, ``info`` scalars),
    ``return``, ``length``, ``terminated``, ``truncated``, ``complete`` (False for abandoned
    episodes), ``final`` (the judge's facts of the judged step, or ``{}``), ``seconds``.
    Several processes may append to the same file.
    """

    def __init__(self, env: gym.Env[Any, Any], path: str | Path, include_tools: bool = False) -> None:
        RecordConstructorArgs.__init__(self, path=str(path), include_tools=include_tools)
        gym.Wrapper.__init__(self, env)
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.include_tools = include_tools
        self.episodes_written = 0
        self._episode: dict[str, Any] | None = None
        self._start = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; an unfinished episode is written first with ``complete: false``."""
        self._flush(complete=False)
        obs, info = self.env.reset(seed=seed, options=options)
        spec = self.env.spec
        self._episode = {
            "env_id": spec.id if spec is not None else type(self.env.unwrapped).__name__,
            "task_id": info.get("task_id", ""),
            "seed": seed,
            "prompt": obs,
            "steps": [],
            "return": 0.0,
            "terminated": False,
            "truncated": False,
            "final": {},
        }
        if self.include_tools:
            self._episode["tools"] = info.get("tools", [])
        self._start = time.perf_counter()
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and record the step; write the episode when it ends."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._episode is not None:
            flat = _flat(info)
            self._episode["steps"].append(
                {
                    "action": action if isinstance(action, str) else repr(action),
                    "observation": obs if isinstance(obs, str) else repr(obs),
                    "reward": _scalar(float(reward)),
                    "info": flat,
                }
            )
            self._episode["return"] += float(reward)
            if info.get("final_eval"):
                self._episode["final"] = flat
            if terminated or truncated:
                self._episode.update(terminated=bool(terminated), truncated=bool(truncated))
                self._flush(complete=True)
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        """Write an unfinished episode, then close the env."""
        self._flush(complete=False)
        super().close()

    def _flush(self, complete: bool) -> None:
        episode, self._episode = self._episode, None
        if episode is None or (not complete and not episode["steps"]):
            return
        episode.update(
            complete=complete,
            length=len(episode["steps"]),
            seconds=round(time.perf_counter() - self._start, 3),
        )
        episode["return"] = _scalar(episode["return"])
        line = json.dumps(episode) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        self.episodes_written += 1


def read_trajectories(path: str | Path) -> list[dict[str, Any]]:
    """Every episode recorded in ``path`` (a truncated last line, from a crash mid-write, is skipped)."""
    episodes = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            episodes.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return episodes
