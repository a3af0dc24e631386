"""ChatHistory: the observation becomes the whole conversation so far, as a JSON message list."""

from __future__ import annotations

import json
from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs

from cuda_gym.envs.spaces import PrintableText
from cuda_gym.text import clean_output


class ChatHistory(gym.Wrapper[str, Any, str, Any], RecordConstructorArgs):
    """Observation = the chat so far: ``json.dumps([{"role", "content"}, ...])`` (ASCII).

    Messages: ``user`` (the reset prompt), then per step ``assistant`` (the action) and
    ``tool_role`` (the env's observation; ``tool`` by default, ``user`` for chat templates without
    a tool role). The space is a :class:`~cuda_gym.envs.PrintableText` of ``max_length`` (a JSON
    string rather than a ``Sequence(Dict)`` space, so it batches in vector envs and passes the env
    checker); ``json.loads(obs)`` gives the list and ``self.messages`` the same list directly.

    When the JSON would exceed ``max_length``, the oldest assistant/tool pairs after the prompt
    are dropped (``info["history_dropped"]`` counts the dropped messages) and, as a last resort,
    message contents are cut in the middle.
    """

    def __init__(self, env: gym.Env[str, Any], max_length: int = 1 << 20, tool_role: str = "tool") -> None:
        RecordConstructorArgs.__init__(self, max_length=max_length, tool_role=tool_role)
        gym.Wrapper.__init__(self, env)
        if tool_role not in ("tool", "user"):
            raise ValueError(f"tool_role must be 'tool' or 'user', got {tool_role!r}")
        self.max_length = max_length
        self.tool_role = tool_role
        self.observation_space = PrintableText(max_length)
        self.messages: list[dict[str, str]] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new conversation with the prompt."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.messages = [{"role": "user", "content": obs}]
        text, dropped = self._encode()
        return text, dict(info, history_dropped=dropped)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """Append the action and the observation to the conversation."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.messages.append({"role": "assistant", "content": action if isinstance(action, str) else repr(action)})
        self.messages.append({"role": self.tool_role, "content": obs})
        text, dropped = self._encode()
        return text, reward, terminated, truncated, dict(info, history_dropped=dropped)

    def _encode(self) -> tuple[str, int]:
        messages = list(self.messages)
        dropped = 0
        text = json.dumps(messages)
        while len(text) > self.max_length and len(messages) > 3:
            del messages[1:3]
            dropped += 2
            text = json.dumps(messages)
        if len(text) > self.max_length:
            # Each message gets an equal share; JSON escapes can at most ~6x a character.
            share = max(16, self.max_length // (7 * len(messages)) - 64)
            messages = [dict(m, content=clean_output(m["content"], share)) for m in messages]
            text = json.dumps(messages)
        return text[: self.max_length], dropped
