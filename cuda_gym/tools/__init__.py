"""The action protocol (parse, format, JSON schemas) and the tools an agent calls in its workspace."""

from __future__ import annotations

from cuda_gym.tools.protocol import (
    ParseError,
    ToolCall,
    format_tool_call,
    from_openai_tool_call,
    parse_action,
    to_openai_tool_call,
    tool_schemas,
)
from cuda_gym.tools.render import render_profile, render_submit, render_verify
from cuda_gym.tools.runner import JudgeBackend, ToolOutcome, ToolRunner
from cuda_gym.tools.schema import MAX_ACTION_CHARS, MAX_CONTENT_CHARS, TOOLS, ToolSpec

__all__ = [
    "MAX_ACTION_CHARS",
    "MAX_CONTENT_CHARS",
    "TOOLS",
    "JudgeBackend",
    "ParseError",
    "ToolCall",
    "ToolOutcome",
    "ToolRunner",
    "ToolSpec",
    "format_tool_call",
    "from_openai_tool_call",
    "parse_action",
    "render_profile",
    "render_submit",
    "render_verify",
    "to_openai_tool_call",
    "tool_schemas",
]
