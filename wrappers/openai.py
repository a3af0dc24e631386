"""OpenAIToolCalls: actions are OpenAI ``tool_calls`` entries instead of tool-call text."""

from __future__ import annotations

import json
import logging
import string
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from gymnasium import spaces
from gymnasium.utils import RecordConstructorArgs

from cuda_gym.envs.spaces import PrintableText
from cuda_gym.errors import ToolError

logger = logging.getLogger(__name__)

_NAME_CHARS = string.ascii_letters + string.digits + "_-"


class OpenAIToolCalls(gym.ActionWrapper[Any, Any, str], RecordConstructorArgs):
    """Accepts an OpenAI Chat Completions tool call as the action and passes its text form on.

    The action is one ``message.tool_calls[i]`` entry,
    ``{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON string>"}}``
    (``arguments`` may also be a dict, as in Hugging Face chat templates), or a list holding exactly
    one such entry; a ``str`` passes through unchanged. The env parses the resulting text, so a bad
    entry still gives an error observation rather than an exception (a list of several calls is
    answered with the env's "one call per step" error).
    """

    def __init__(self, env: gym.Env[Any, str]) -> None:
        RecordConstructorArgs.__init__(self)
        gym.ActionWrapper.__init__(self, env)
        max_length = getattr(env.action_space, "max_length", 262144)
        self.action_space = spaces.Dict(
            {
                "id": spaces.Text(64, min_length=0, charset=_NAME_CHARS),
                "type": spaces.Text(8, min_length=0, charset=string.ascii_lowercase),
                "function": spaces.Dict(
                    {
                        "name": spaces.Text(64, min_length=1, charset=_NAME_CHARS),
                        "arguments": PrintableText(max_length),
                    }
                ),
            }
        )

    def action(self, action: Any) -> str:
        """The tool-call text for an OpenAI ``tool_calls`` entry."""
        from cuda_gym.tools import format_tool_call, from_openai_tool_call

        if isinstance(action, str):
            return action
        if isinstance(action, (list, tuple)):
            if len(action) == 1:
                action = action[0]
            else:
                return "\n".join(self._as_text(entry) for entry in action) or "[]"
        if isinstance(action, Mapping):
            try:
                call = from_openai_tool_call(dict(action))
            except ToolError as exc:
                logger.debug("bad OpenAI tool call %r: %s", action, exc)
                return _dump(action)
            return format_tool_call(call.name, call.arguments)
        return _dump(action)

    def _as_text(self, entry: Any) -> str:
        return self.action(entry) if isinstance(entry, Mapping) else _dump(entry)


def _dump(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)
