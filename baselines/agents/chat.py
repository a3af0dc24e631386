"""The chat agents' conversation: messages in the chat protocol's roles, cut to a context budget."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CUT_NOTE = "[older tool output cut to fit the context: {n} characters]"
"""What replaces an old observation when the conversation is cut to fit the model's context."""

SYSTEM_PROMPT = (
    "You are an expert CUDA and C++ performance engineer working in a sandboxed workspace. "
    "Act by calling exactly one tool per turn. Make the program correct first, then fast; "
    "call submit when you are done."
)
"""The default system message of the chat agents."""


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """A cheap token estimate of ``messages``: 4 characters a token, plus a few per message.

    Good enough to keep a budget (servers count exactly and answer an overflow with an error,
    which the agents handle by cutting harder).
    """
    total = 0
    for message in messages:
        total += 4 + len(str(message.get("content") or "")) // 4
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            total += 4 + (len(function.get("name", "")) + len(function.get("arguments", ""))) // 4
    return total


@dataclass
class Conversation:
    """The messages of one episode, oldest first, in the chat-completions roles.

    ``messages[0]`` is the system message (when there is one) and the task prompt follows; they are
    never cut. :meth:`fit` returns a copy within a token budget: the oldest observations (``tool``
    messages and the ``user`` messages after the task) are replaced by a short note first, then the
    oldest assistant messages' text, while the last ``keep_last`` messages stay whole.
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    keep_last: int = 2
    """Messages at the end that are never cut (the latest action and its observation)."""

    def start(self, prompt: str, system: str | None) -> None:
        """Begin an episode: the system message (if any) and the task prompt."""
        self.messages = [{"role": "system", "content": system}] if system else []
        self.messages.append({"role": "user", "content": prompt})

    @property
    def head(self) -> int:
        """How many leading messages are never cut (system and task prompt)."""
        return 2 if self.messages and self.messages[0]["role"] == "system" else 1

    def add(self, message: dict[str, Any]) -> None:
        """Append one message."""
        self.messages.append(message)

    def fit(self, budget: int, count: Callable[[list[dict[str, Any]]], int] = estimate_tokens) -> list[dict[str, Any]]:
        """A copy of the messages whose ``count`` is at most ``budget`` where cutting can get there.

        Cuts observations oldest first, then old assistant text (tool calls are kept: the protocol
        pairs each tool message with its call). The result may still exceed the budget when the
        head and the last messages alone do.
        """
        out = copy.deepcopy(self.messages)
        if count(out) <= budget:
            return out
        last = max(self.head, len(out) - self.keep_last)
        for roles in (("tool", "user"), ("assistant",)):
            for i in range(self.head, last):
                message = out[i]
                content = str(message.get("content") or "")
                if message["role"] not in roles or not content or content.startswith("[older "):
                    continue
                message["content"] = CUT_NOTE.format(n=len(content))
                if count(out) <= budget:
                    return out
        return out


@dataclass
class Usage:
    """Token usage and request counts of an agent, summed over its episodes (or since ``reset``)."""

    requests: int = 0
    """Successful model calls."""
    retries: int = 0
    """Calls repeated after a server error, a rate limit or a lost connection."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context_cuts: int = 0
    """Times the conversation was cut harder after the server said it overflowed the context."""

    def as_dict(self) -> dict[str, int]:
        """The counts as a plain dict (for the harness's JSONL records)."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "context_cuts": self.context_cuts,
        }
