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
        self._encoded: list[str] = []  # json.dumps of each message, in order
        self._dropped = 0  # messages[1 : 1 + _dropped] are left out of the observation
        self._kept_chars = 0  # total length of the encoded messages not left out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new conversation with the prompt."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.messages, self._encoded, self._dropped, self._kept_chars = [], [], 0, 0
        self._append({"role": "user", "content": obs})
        text, dropped = self._encode()
        return text, dict(info, history_dropped=dropped)

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """Append the action and the observation to the conversation."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._append({"role": "assistant", "content": action if isinstance(action, str) else repr(action)})
        self._append({"role": self.tool_role, "content": obs})
        text, dropped = self._encode()
        return text, reward, terminated, truncated, dict(info, history_dropped=dropped)

    def _append(self, message: dict[str, str]) -> None:
        encoded = json.dumps(message)
        self.messages.append(message)
        self._encoded.append(encoded)
        self._kept_chars += len(encoded)

    def _encode(self) -> tuple[str, int]:
        # json.dumps(list) is "[" + ", ".join(json.dumps(item) for item) + "]" with the default
        # separators, so each message is encoded once. History only grows, so the oldest pairs
        # dropped at the last step stay dropped: the count carries over instead of restarting at 0.
        encoded = self._encoded

        def length() -> int:  # len(json.dumps(kept messages))
            return self._kept_chars + 2 * (len(encoded) - self._dropped) if encoded else 2

        while length() > self.max_length and len(encoded) - self._dropped > 3:
            first = 1 + self._dropped
            self._kept_chars -= len(encoded[first]) + len(encoded[first + 1])
            self._dropped += 2
        kept = encoded[:1] + encoded[1 + self._dropped:]
        text = "[" + ", ".join(kept) + "]"
        if len(text) > self.max_length:
            # Each message gets an equal share; JSON escapes can at most ~6x a character.
            messages = self.messages[:1] + self.messages[1 + self._dropped:]
            share = max(16, self.max_length // (7 * len(messages)) - 64)
            messages = [dict(m, content=clean_output(m["content"], share)) for m in messages]
            text = json.dumps(messages)
        return text[: self.max_length], self._dropped
