"""ToolMenu and TextFeatures: a Discrete action menu and a Box observation for SB3 and skrl."""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

TOOLS = ("compile", "verify", "profile", "submit")
"""The argument-free tools at the head of every menu, in this order."""


def write_files_command(files: Mapping[str, str]) -> str:
    """A bash command that replaces ``kernels/`` and writes ``files`` (path -> content) in one call."""
    lines = ["set -e", "rm -rf kernels", "mkdir -p kernels"]
    for index, (path, content) in enumerate(files.items()):
        if "'" in path or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"unsafe path in a menu solution: {path!r}")
        marker = f"CUDA_GYM_EOF_{index}"
        while marker in content:
            marker += "_"
        body = content if content.endswith("\n") else content + "\n"
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if parent:
            lines.append(f"mkdir -p '{parent}'")
        lines.append(f"cat > '{path}' <<'{marker}'\n{body}{marker}")
    return "\n".join(lines) + "\n"


def _inner(wrapper: gym.Wrapper[Any, Any, Any, Any]) -> gym.Env[Any, Any]:
    """The wrapped env as the inner env it is: Gymnasium annotates ``Wrapper.env`` with the wrapper's
    own observation and action types, which an adapter that changes both does not share."""
    return wrapper.env


def _inner_of(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
    """``env`` for ``Wrapper.__init__`` (see ``_inner``)."""
    return env


class ToolMenu(gym.ActionWrapper[Any, np.int64, str], RecordConstructorArgs):
    """Action = ``Discrete(4 + len(solutions))``: an index into a menu of canonical tool calls.

    ``0`` compile, ``1`` verify, ``2`` profile, ``3`` submit, ``4 + i`` write candidate solution
    ``i`` (``solutions[i]`` maps workspace paths to contents, e.g. ``kernels/op.cpp``,
    ``kernels/op_binding.cpp``, ``model_new.py``; writing one replaces ``kernels/`` and writes
    every file in one ``bash`` call, so one menu action is one env turn). ``self.menu`` lists
    ``(label, action_text)``.

    ``action_masks()`` (for sb3-contrib's ``MaskablePPO``) allows writing any solution other than
    the one in place, and compile/verify/profile/submit only once a solution was written this
    episode. Unmasked invalid choices are still legal actions (the env just runs them).
    """

    def __init__(self, env: gym.Env[Any, str], solutions: Sequence[Mapping[str, str]]) -> None:
        RecordConstructorArgs.__init__(self, solutions=[dict(s) for s in solutions])
        gym.ActionWrapper.__init__(self, env)
        from cuda_gym.tools import format_tool_call

        self.menu: list[tuple[str, str]] = [(name, format_tool_call(name, {})) for name in TOOLS]
        for index, files in enumerate(solutions):
            if not files:
                raise ValueError(f"solution {index} holds no file")
            command = write_files_command(files)
            self.menu.append((f"write_solution_{index}", format_tool_call("bash", {"command": command})))
        self.action_space = spaces.Discrete(len(self.menu))
        self.current_solution: int | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; no solution is in place."""
        self.current_solution = None
        return self.env.reset(seed=seed, options=options)

    def step(self, action: int | np.int64) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Run the menu entry ``action``; ``info["menu"]`` is its label."""
        index = int(action)
        obs, reward, terminated, truncated, info = _inner(self).step(self.action(index))
        if index >= len(TOOLS) and info.get("tool_ok", True):
            self.current_solution = index - len(TOOLS)
        return obs, reward, terminated, truncated, dict(info, menu=self.menu[index][0])

    def action(self, action: int | np.int64) -> str:
        """The tool-call text of menu entry ``action``."""
        index = int(action)
        if not 0 <= index < len(self.menu):
            raise ValueError(f"menu action must be in [0, {len(self.menu)}), got {action}")
        return self.menu[index][1]

    def action_masks(self) -> np.ndarray:
        """Which menu entries make sense now (see the class docstring)."""
        mask = np.ones(len(self.menu), dtype=bool)
        if self.current_solution is None:
            mask[: len(TOOLS)] = False
        else:
            mask[len(TOOLS) + self.current_solution] = False
        return mask


_TOKEN = re.compile(r"[a-z_]+|\d+")

INFO_FEATURES = (
    "parse_ok",
    "tool_ok",
    "compiled",
    "correct",
    "passed",
    "final_eval",
    "log_speedup_vs_eager",
    "log_speedup_vs_compile",
    "milestone",
    "turn_fraction",
    "length_fraction",
)
"""The scalar features after the hashed words, in order (each in [-1, 1])."""


class TextFeatures(gym.Wrapper[np.ndarray, Any, str, Any], RecordConstructorArgs):
    """Observation = ``Box(-1, 1, (dim + 11,), float32)``: hashed words of the text, then scalars.

    The first ``dim`` entries are a bag of words of the observation (lower-cased word and number
    tokens hashed with ``zlib.crc32`` (stable across processes, unlike ``hash``) into ``dim``
    buckets; value ``min(1, log1p(count) / log1p(1000))``). Then :data:`INFO_FEATURES`: flags from
    ``info`` (the judge's facts persist within an episode until the next judgement), log2 speedups
    squashed with ``tanh(x / 2)`` (0 when unknown), ``milestone / 3``, ``turn / max_turns`` and the
    observation length over the space's ``max_length``.
    """

    def __init__(self, env: gym.Env[str, Any], dim: int = 256) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        RecordConstructorArgs.__init__(self, dim=dim)
        gym.Wrapper.__init__(self, _inner_of(env))
        self.dim = dim
        self.max_length = getattr(env.observation_space, "max_length", 65536)
        self.observation_space = spaces.Box(-1.0, 1.0, (dim + len(INFO_FEATURES),), np.float32)
        self._facts: dict[str, Any] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the env and featurise the prompt."""
        obs, info = _inner(self).reset(seed=seed, options=options)
        self._facts = {}
        return self.features(obs, info), info

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step the env and featurise its observation."""
        obs, reward, terminated, truncated, info = _inner(self).step(action)
        return self.features(obs, info), reward, terminated, truncated, info

    def features(self, text: str, info: Mapping[str, Any]) -> np.ndarray:
        """The feature vector of one observation and its info."""
        out = np.zeros(self.dim + len(INFO_FEATURES), dtype=np.float32)
        counts = np.zeros(self.dim, dtype=np.float64)
        for token in _TOKEN.findall(text.lower()):
            counts[zlib.crc32(token.encode()) % self.dim] += 1
        out[: self.dim] = np.minimum(1.0, np.log1p(counts) / math.log1p(1000))
        if "judge_mode" in info or "compiled" in info:
            for key in ("compiled", "correct", "passed", "speedup_vs_eager", "speedup_vs_compile", "milestone"):
                if key in info:
                    self._facts[key] = info[key]
        turn = float(info.get("turn", 0) or 0)
        max_turns = float(info.get("max_turns", 0) or 0)
        scalars = [
            float(bool(info.get("parse_ok", True))),
            float(bool(info.get("tool_ok", True))),
            float(bool(self._facts.get("compiled", False))),
            float(bool(self._facts.get("correct", False))),
            float(bool(self._facts.get("passed", False))),
            float(bool(info.get("final_eval", False))),
            _squash(self._facts.get("speedup_vs_eager")),
            _squash(self._facts.get("speedup_vs_compile")),
            float(self._facts.get("milestone", 0) or 0) / 3.0,
            turn / max_turns if max_turns > 0 else 0.0,
            min(1.0, len(text) / self.max_length),
        ]
        out[self.dim :] = np.clip(np.asarray(scalars, dtype=np.float32), -1.0, 1.0)
        return out


def _squash(speedup: Any) -> float:
    try:
        value = float(speedup)
    except (TypeError, ValueError):
        return 0.0
    if not (math.isfinite(value) and value > 0):
        return 0.0
    return math.tanh(math.log2(value) / 2.0)
