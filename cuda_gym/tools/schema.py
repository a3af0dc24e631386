"""The tool catalogue (names, descriptions, JSON schemas) and a small validator for the schema subset used."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_ACTION_CHARS = 256 * 1024
"""Longest action text accepted (characters); longer actions are refused without being parsed."""

MAX_CONTENT_CHARS = 200_000
"""Longest ``content`` of ``write_file`` and longest ``old_string``/``new_string`` of an edit."""

MAX_COMMAND_CHARS = 16_384
"""Longest ``bash`` command."""

MAX_BASH_TIMEOUT = 600
"""Largest ``timeout`` (seconds) the ``bash`` schema admits; a runner may clamp further."""

MAX_EDITS = 50
"""Most edits in one ``multi_edit`` call."""

MAX_PATH_CHARS = 1024
"""Longest path or pattern argument."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the agent sees it.

    Attributes:
        name: the function name used in tool calls.
        description: what the tool does and its limits, written for an LLM agent.
        parameters: JSON schema of the arguments (an ``object`` with ``additionalProperties: false``).
    """

    name: str
    description: str
    parameters: dict[str, Any]

    def signature(self) -> str:
        """A one-line reminder such as ``bash(command: string, timeout?: integer)``."""
        props = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", []))
        parts = []
        for key, sub in props.items():
            mark = "" if key in required else "?"
            parts.append(f"{key}{mark}: {_type_name(sub)}")
        return f"{self.name}({', '.join(parts)})"


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _path(what: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS, "description": what}


def _text(what: str, min_length: int = 0) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": MAX_CONTENT_CHARS, "description": what}


_EDIT_ITEM = _obj(
    {
        "old_string": _text("Exact text to replace (must occur exactly once unless replace_all).", 1),
        "new_string": _text("Replacement text."),
        "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
    },
    ["old_string", "new_string"],
)

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in [
        ToolSpec(
            "bash",
            "Run a shell command (bash -c) in the workspace root, inside a sandbox: no network, only the "
            "workspace is writable, protected files are read-only. Returns combined stdout/stderr (long "
            "output is cut in the middle) and the exit code. Use it for ls, nvcc --version, small Python "
            "scripts; use the compile/verify/profile tools rather than building or timing by hand.",
            _obj(
                {
                    "command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND_CHARS,
                                "description": "The shell command."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_BASH_TIMEOUT,
                                "description": "Wall-clock limit in seconds (default 60)."},
                },
                ["command"],
            ),
        ),
        ToolSpec(
            "read_file",
            "Read a text file of the workspace with line numbers. Shows lines start_line..end_line "
            "(1-based, inclusive; default: from the top until the output budget is used, then says how to "
            "read on). Binary files are refused.",
            _obj(
                {
                    "path": _path("Path relative to the workspace root, e.g. kernels/gelu.cu."),
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line (default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line (default: end)."},
                },
                ["path"],
            ),
        ),
        ToolSpec(
            "write_file",
            "Create or overwrite a file in the workspace with the given content; parent directories are "
            f"created. Content is limited to {MAX_CONTENT_CHARS} characters. Protected files (SKILL.md, "
            "model.py, binding.cpp, binding_registry.h) cannot be written.",
            _obj(
                {
                    "path": _path("Path relative to the workspace root, e.g. kernels/gelu.cu."),
                    "content": _text("The complete new file content."),
                },
                ["path", "content"],
            ),
        ),
        ToolSpec(
            "edit_file",
            "Replace exact text in a workspace file. old_string must match the file exactly (whitespace and "
            "indentation included) and occur exactly once, unless replace_all is true. Read the file first.",
            _obj(
                {
                    "path": _path("Path relative to the workspace root."),
                    "old_string": _EDIT_ITEM["properties"]["old_string"],
                    "new_string": _EDIT_ITEM["properties"]["new_string"],
                    "replace_all": _EDIT_ITEM["properties"]["replace_all"],
                },
                ["path", "old_string", "new_string"],
            ),
        ),
        ToolSpec(
            "multi_edit",
            "Apply several exact-text edits to one file, in order, atomically: if any edit fails (no match, "
            f"or several matches without replace_all) nothing is written. At most {MAX_EDITS} edits.",
            _obj(
                {
                    "path": _path("Path relative to the workspace root."),
                    "edits": {"type": "array", "items": _EDIT_ITEM, "minItems": 1, "maxItems": MAX_EDITS,
                              "description": "Edits applied one after the other to the file's text."},
                },
                ["path", "edits"],
            ),
        ),
        ToolSpec(
            "glob",
            "List workspace files matching a glob pattern relative to the workspace root (e.g. "
            "'kernels/*.cu', '**/*.py'). Results are sorted and capped.",
            _obj({"pattern": _path("Glob pattern relative to the workspace root.")}, ["pattern"]),
        ),
        ToolSpec(
            "grep",
            "Search workspace text files for a regular expression (Python syntax). Prints path:line: text "
            "for each matching line; results are capped.",
            _obj(
                {
                    "pattern": _path("Regular expression."),
                    "path": _path("File or directory to search, relative to the workspace root (default '.')."),
                    "glob": _path("Only search files whose path matches this glob, e.g. '*.cu'."),
                },
                ["pattern"],
            ),
        ),
        ToolSpec(
            "compile",
            "Build the CUDA extension from kernels/*.cu, kernels/*_binding.cpp and binding.cpp "
            "(incremental, cached). Returns success or the compiler errors.",
            _obj({}, []),
        ),
        ToolSpec(
            "verify",
            "Compile if needed, then check model_new.py's ModelNew against the reference Model on fresh "
            "random inputs on the device, and check the rules (no PyTorch compute fallback, no hacks). "
            "Returns per-trial pass/fail with max errors and any rule violation.",
            _obj({}, []),
        ),
        ToolSpec(
            "profile",
            "Compile if needed, verify, then time ModelNew against eager PyTorch and torch.compile and show "
            "the per-kernel profile of both. Returns timings, speedups and kernel tables.",
            _obj({}, []),
        ),
        ToolSpec(
            "submit",
            "Submit the workspace as the final answer and end the episode. The judge compiles, verifies and "
            "times it; the reward is -1 (fails), 1 (correct), 2 (>5% faster than eager), 3 (>5% faster than "
            "eager and torch.compile).",
            _obj({}, []),
        ),
    ]
}
"""Every tool, by name, in the order shown to agents."""


def _type_name(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type_name(schema.get('items', {}))}"
    if kind == "object" and schema.get("properties"):
        return "{" + ", ".join(schema["properties"]) + "}"
    return str(kind)


def validate(value: Any, schema: dict[str, Any], where: str = "arguments") -> tuple[Any, str | None]:
    """Check ``value`` against ``schema`` (type, properties, required, additionalProperties: false,
    enum, minimum, maximum, minLength, maxLength, items, minItems, maxItems).

    Returns ``(value, None)`` when valid, with integral floats normalised to ``int`` where an integer
    is expected, or ``(value, message)`` naming the first problem found.
    """
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return value, f"{where} must be an object, got {_json_type(value)}"
        props = schema.get("properties", {})
        inside = "" if where == "arguments" else f" in {where}"
        for key in schema.get("required", []):
            if key not in value:
                return value, f"missing required argument '{key}'{inside}"
        if schema.get("additionalProperties") is False:
            extra = [k for k in value if k not in props]
            if extra:
                allowed = ", ".join(props) or "none"
                return value, f"unexpected argument '{extra[0]}'{inside} (allowed: {allowed})"
        out = {}
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                out[key] = item
                continue
            norm, err = validate(item, sub, f"'{key}'" if where == "arguments" else f"{where}.{key}")
            if err:
                return value, err
            out[key] = norm
        return out, None
    if kind == "array":
        if not isinstance(value, list):
            return value, f"{where} must be an array, got {_json_type(value)}"
        if len(value) < schema.get("minItems", 0):
            return value, f"{where} must have at least {schema['minItems']} item(s)"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return value, f"{where} has {len(value)} items; at most {schema['maxItems']} allowed"
        items = schema.get("items", {})
        out_list = []
        for i, item in enumerate(value):
            norm, err = validate(item, items, f"{where}[{i}]")
            if err:
                return value, err
            out_list.append(norm)
        return out_list, None
    if kind == "string":
        if not isinstance(value, str):
            return value, f"{where} must be a string, got {_json_type(value)}"
        if len(value) < schema.get("minLength", 0):
            return value, f"{where} must not be empty" if schema["minLength"] == 1 else (
                f"{where} must have at least {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return value, f"{where} has {len(value)} characters; at most {schema['maxLength']} allowed"
        bad = _lone_surrogate(value)
        if bad is not None:
            return value, (f"{where} holds a lone surrogate (\\u{ord(value[bad]):04x}) at character {bad}, which "
                           "is not valid Unicode text; send UTF-8 encodable text")
    elif kind == "integer":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            return value, f"{where} must be an integer, got {_json_type(value)}"
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return value, f"{where} must be a finite number, got {_json_type(value)}"
    elif kind == "boolean":
        if not isinstance(value, bool):
            return value, f"{where} must be true or false, got {_json_type(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return value, f"{where} must be one of {', '.join(map(repr, schema['enum']))}"
    if "minimum" in schema and value < schema["minimum"]:
        return value, f"{where} must be >= {schema['minimum']}, got {value}"
    if "maximum" in schema and value > schema["maximum"]:
        return value, f"{where} must be <= {schema['maximum']}, got {value}"
    return value, None


def _lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in ``text`` (JSON's ``\\ud800`` decodes to one), else ``None``."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else "a non-finite number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
