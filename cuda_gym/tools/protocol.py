"""The action protocol: parse an agent's text into one validated tool call, and format calls back."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cuda_gym.errors import ToolError
from cuda_gym.tools.schema import MAX_ACTION_CHARS, TOOLS, validate

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"

EXPECTED = (
    'Expected exactly one tool call: <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call> '
    '(or a bare JSON object {"name": ..., "arguments": ...}).'
)
"""The reminder appended to every parse error."""

_MAX_CANDIDATES = 64
"""Most places tried as the start of a call; bounds the parser's work on adversarial text."""

_DECODER = json.JSONDecoder(strict=False)  # literal newlines/tabs inside strings are common in LLM output
_BARE_START = re.compile(r'\{\s*"(?:name|function)"\s*:')
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?")


@dataclass(frozen=True)
class ToolCall:
    """One tool call: a tool name from ``TOOLS`` and its validated arguments."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParseError:
    """Why an action is not a valid tool call.

    Attributes:
        message: what was wrong and the expected form, ready to show to the agent.
        tool: the tool name when the call named a known tool (its arguments were wrong), else ``""``.
    """

    message: str
    tool: str = ""

    def __str__(self) -> str:
        return self.message


def parse_action(text: Any) -> ToolCall | ParseError:
    """Parse an agent's action into a ``ToolCall``, or say what is wrong with a ``ParseError``.

    Accepts exactly one ``<tool_call>{json}</tool_call>`` block anywhere in free text (a missing
    closing tag at the very end is tolerated; a leading ``<think>...</think>`` block is ignored),
    or a bare JSON object ``{"name": ..., "arguments": ...}``, optionally inside a code fence.
    ``arguments`` may be an object or a JSON string (OpenAI style). Never raises.
    """
    try:
        return _parse(text)
    except Exception as exc:  # the parser must never raise on agent input
        return ParseError(f"could not parse the action ({type(exc).__name__}). {EXPECTED}")


def _parse(text: Any) -> ToolCall | ParseError:
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text[: MAX_ACTION_CHARS * 4 + 1]).decode("utf-8", errors="replace")
    if isinstance(text, dict):
        return _to_call(text)
    if not isinstance(text, str):
        return ParseError(f"the action must be text, got {type(text).__name__}. {EXPECTED}")
    if len(text) > MAX_ACTION_CHARS:
        return ParseError(
            f"the action is {len(text)} characters; at most {MAX_ACTION_CHARS} are accepted. "
            "Write large files in several steps (write_file, then edit_file)."
        )
    text = _strip_think(text)
    if not text.strip():
        return ParseError(f"the action is empty. {EXPECTED}")
    whole, json_error = _parse_whole(text)
    if whole is not None:
        return whole
    if OPEN_TAG in text:
        return _parse_tagged(text)
    return _parse_bare(text, json_error)


def _strip_think(text: str) -> str:
    stripped = text.lstrip()
    if stripped.startswith("<think>") and "</think>" in stripped:
        return stripped[stripped.index("</think>") + len("</think>"):]
    return text


def _parse_tagged(text: str) -> ToolCall | ParseError:
    calls: list[Any] = []
    first_error: str | None = None
    pos = 0
    for _ in range(_MAX_CANDIDATES):
        start = text.find(OPEN_TAG, pos)
        if start < 0:
            break
        body = _skip_ws(text, start + len(OPEN_TAG))
        fence = _FENCE.match(text, body)
        if fence:
            body = _skip_ws(text, fence.end())
        try:
            obj, end = _DECODER.raw_decode(text, body)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"the text after {OPEN_TAG} is not valid JSON: {_json_error(exc)}"
            pos = start + len(OPEN_TAG)
            continue
        except RecursionError:
            first_error = first_error or f"the JSON after {OPEN_TAG} is nested too deeply"
            pos = start + len(OPEN_TAG)
            continue
        end = _skip_ws(text, end)
        if text.startswith("```", end):
            end = _skip_ws(text, end + 3)
        if text.startswith(CLOSE_TAG, end):
            end += len(CLOSE_TAG)
        elif end < len(text) and not text.startswith(OPEN_TAG, end):
            first_error = first_error or (
                f"unexpected text after the JSON object, expected {CLOSE_TAG}: {text[end:end + 40]!r}"
            )
            pos = end
            continue
        calls.append(obj)
        pos = end
    if len(calls) > 1:
        return ParseError(f"found {len(calls)} tool calls; send exactly one per action. {EXPECTED}")
    if calls:
        return _to_call(calls[0])
    return ParseError(f"{first_error or 'no tool call found'}. {EXPECTED}")


def _parse_whole(text: str) -> tuple[ToolCall | ParseError | None, str]:
    """The action is one JSON value, optionally fenced: parse it as such (strings may hold tags)."""
    stripped = text.strip()
    fence = _FENCE.match(stripped)
    inner = stripped[fence.end():] if fence else stripped
    if fence and inner.endswith("```"):
        inner = inner[:-3]
    inner = inner.strip()
    if not inner.startswith(("{", "[")):
        return None, ""
    try:
        obj, end = _DECODER.raw_decode(inner)
    except json.JSONDecodeError as exc:
        return None, f"the action is not valid JSON: {_json_error(exc)}"
    except RecursionError:
        return None, "the action's JSON is nested too deeply"
    if inner[end:].strip():
        return None, ""
    if isinstance(obj, list):
        return ParseError(f"the action is a JSON array; send exactly one call object. {EXPECTED}"), ""
    return _to_call(obj), ""


def _parse_bare(text: str, json_error: str = "") -> ToolCall | ParseError:
    calls = list(_bare_candidates(text))
    if len(calls) > 1:
        return ParseError(f"found {len(calls)} tool calls; send exactly one per action. {EXPECTED}")
    if calls:
        return _to_call(calls[0])
    return ParseError(f"{json_error or 'no tool call found in the action'}. {EXPECTED}")


def _bare_candidates(text: str) -> Iterable[Any]:
    pos = 0
    for _ in range(_MAX_CANDIDATES):
        match = _BARE_START.search(text, pos)
        if match is None:
            return
        try:
            obj, end = _DECODER.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError):
            pos = match.start() + 1
            continue
        yield obj
        pos = end


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _json_error(exc: json.JSONDecodeError) -> str:
    return f"{exc.msg} at line {exc.lineno} column {exc.colno} (char {exc.pos})"


def _to_call(obj: Any) -> ToolCall | ParseError:
    """Validate a decoded call object (Hermes ``{name, arguments}`` or OpenAI ``{function: {...}}``)."""
    if not isinstance(obj, dict):
        return ParseError(f"the tool call must be a JSON object, got {type(obj).__name__}. {EXPECTED}")
    if "function" in obj and isinstance(obj["function"], dict):
        extra = set(obj) - {"function", "id", "type"}
        obj = obj["function"]
    else:
        extra = set(obj) - {"name", "arguments", "id", "type"}
    if extra:
        return ParseError(f"unexpected key '{sorted(extra)[0]}' in the tool call. {EXPECTED}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParseError(f"the tool call has no \"name\" string. {EXPECTED}")
    spec = TOOLS.get(name)
    if spec is None:
        return ParseError(f"unknown tool '{name[:80]}'. Available tools: {', '.join(TOOLS)}.")
    args = obj.get("arguments", {})
    if args is None:
        args = {}
    if isinstance(args, str):
        if not args.strip():
            args = {}
        else:
            try:
                args = _DECODER.decode(args)
            except json.JSONDecodeError as exc:
                return ParseError(
                    f"{name}: \"arguments\" is a string but not valid JSON: {_json_error(exc)}. "
                    f"Expected {spec.signature()}.", tool=name)
            except RecursionError:
                return ParseError(f"{name}: \"arguments\" is nested too deeply.", tool=name)
    if not isinstance(args, dict):
        return ParseError(f"{name}: \"arguments\" must be a JSON object. Expected {spec.signature()}.", tool=name)
    norm, err = validate(args, spec.parameters)
    if err:
        return ParseError(f"{name}: {err}. Expected {spec.signature()}.", tool=name)
    return ToolCall(name, norm)


def format_tool_call(name: str, arguments: dict[str, Any] | None = None) -> str:
    """The Hermes/Qwen text of one call: ``<tool_call>\\n{json}\\n</tool_call>``."""
    payload = json.dumps({"name": name, "arguments": arguments or {}}, ensure_ascii=False)
    return f"{OPEN_TAG}\n{payload}\n{CLOSE_TAG}"


def to_openai_tool_call(call: ToolCall, call_id: str | None = None) -> dict[str, Any]:
    """The OpenAI chat-completions form: ``{"id", "type": "function", "function": {"name", "arguments"}}``
    with ``arguments`` as a JSON string. ``call_id`` defaults to ``call_<n>`` from a content hash."""
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    if call_id is None:
        call_id = "call_" + hashlib.sha256(f"{call.name}\0{arguments}".encode()).hexdigest()[:24]
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def from_openai_tool_call(data: Any) -> ToolCall:
    """Inverse of ``to_openai_tool_call`` (also takes ``{"name", "arguments"}``).

    Raises:
        ToolError: ``data`` is not a valid call of a known tool; the message says what is wrong.
    """
    result = _to_call(data) if isinstance(data, dict) else ParseError(
        f"expected a dict, got {type(data).__name__}")
    if isinstance(result, ParseError):
        raise ToolError(f"invalid OpenAI tool call: {result.message}")
    return result


def tool_schemas(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """OpenAI tool schemas ``{"type": "function", "function": {name, description, parameters}}``.

    Args:
        names: tools to include, in that order (default: every tool).

    Raises:
        ToolError: a name is not a tool.
    """
    chosen = list(TOOLS) if names is None else list(names)
    unknown = [n for n in chosen if n not in TOOLS]
    if unknown:
        raise ToolError(f"unknown tool {unknown[0]!r}; choose from {', '.join(TOOLS)}")
    return [
        {
            "type": "function",
            "function": {
                "name": TOOLS[n].name,
                "description": TOOLS[n].description,
                "parameters": json.loads(json.dumps(TOOLS[n].parameters)),
            },
        }
        for n in chosen
    ]
