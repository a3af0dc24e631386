"""The single-turn answer format: files as fenced blocks with paths, or one KernelBench-style file.

An answer is free text (reasoning is ignored) holding either

1. **workspace files**, each a fenced block whose path is named in the fence's info string or on
   the line just above it::

       ```cuda kernels/add.cu          ### kernels/add_binding.cpp
       ...                             ```cpp
       ```                             ...
                                       ```

   A path is a token with a ``/`` or a file extension (``model_new.py``, ``kernels/add.cu``); the
   line above may be a heading (``### path``), ``File: path``, ``**path**`` or ```` `path` ````.
   Every named block is written into the workspace (protected files are refused); or

2. **one KernelBench-style file**: no block names a path and one ```` ```python ```` block (or the
   whole answer, when it has no fence) defines ``class ModelNew`` (typically compiling its kernels
   with ``torch.utils.cpp_extension.load_inline``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuda_gym.errors import SolutionFormatError

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})(?P<info>[^\n`]*)$", re.MULTILINE)
_PATH = re.compile(r"^(?:\./)?[\w.\-]+(?:/[\w.\-]+)*$")
_LABEL = re.compile(r"^(?:#+\s*|\*\*|`|(?:file|path)\s*:\s*)*(?P<path>[^\s*`]+?)(?:\*\*|`|:)*$", re.IGNORECASE)
_PYTHON_LANGS = {"python", "py", "python3", ""}


@dataclass
class Solution:
    """A parsed single-turn answer.

    Attributes:
        files: workspace-relative path -> content, for the workspace form.
        single_file: the program text of the KernelBench-style form, else ``None``.
    """

    files: dict[str, str] = field(default_factory=dict)
    single_file: str | None = None


FORMAT_HELP = (
    "Answer with every file as a fenced block whose opening line names its path, e.g.\n"
    "```cuda kernels/my_op.cu\n...\n```\n```cpp kernels/my_op_binding.cpp\n...\n```\n"
    "```python model_new.py\n...\n```\n"
    "or with one ```python block holding a KernelBench-style file that defines class ModelNew."
)


def _is_path(token: str) -> bool:
    if not _PATH.match(token) or token.startswith("-"):
        return False
    return "/" in token or re.search(r"\.[A-Za-z0-9]+$", token) is not None


def _blocks(text: str) -> list[tuple[str, str, str]]:
    """``(info, label_line, body)`` for every closed fenced block, in order."""
    blocks: list[tuple[str, str, str]] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        ticks = opening.group("ticks")
        closing = re.compile(rf"^[ \t]*{re.escape(ticks[0])}{{{len(ticks)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, opening.end())
        if end is None:
            return blocks
        body = text[opening.end() + 1 : end.start()]
        before = text[: opening.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        blocks.append((opening.group("info").strip(), before, body))
        pos = end.end()


def _block_path(info: str, label: str) -> str | None:
    tokens = info.split()
    for token in reversed(tokens):
        if _is_path(token):
            return token
    match = _LABEL.match(label) if label else None
    if match and _is_path(match.group("path")):
        return match.group("path")
    return None


def parse_solution(text: str) -> Solution:
    """Parse a single-turn answer (module docstring); raises :class:`SolutionFormatError`."""
    if not isinstance(text, str):
        raise SolutionFormatError(f"an answer must be a str, got {type(text).__name__}. {FORMAT_HELP}")
    blocks = _blocks(text)
    files: dict[str, str] = {}
    for info, label, body in blocks:
        path = _block_path(info, label)
        if path is None:
            continue
        path = path[2:] if path.startswith("./") else path
        if path in files:
            raise SolutionFormatError(f"the answer holds two blocks for {path}: give each file once")
        files[path] = body
    if files:
        return Solution(files=files)
    python = [body for info, _, body in blocks if (info.split() or [""])[0].lower() in _PYTHON_LANGS]
    candidates = [body for body in python if "class ModelNew" in body]
    if not blocks and "class ModelNew" in text:
        candidates = [text]
    if len(candidates) == 1:
        return Solution(single_file=candidates[0])
    if len(candidates) > 1:
        raise SolutionFormatError(f"the answer holds {len(candidates)} python blocks defining ModelNew: give one")
    raise SolutionFormatError(f"no solution found in the answer. {FORMAT_HELP}")


def format_solution(files: dict[str, str]) -> str:
    """The canonical answer text for ``files`` (path -> content), as ``parse_solution`` reads it."""
    langs = {".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".h": "cpp", ".py": "python"}
    parts = []
    for path, content in files.items():
        ext = path[path.rfind(".") :] if "." in path else ""
        ticks = "````" if "```" in content else "```"
        body = content if content.endswith("\n") else content + "\n"
        parts.append(f"{ticks}{langs.get(ext, 'text')} {path}\n{body}{ticks}")
    return "\n\n".join(parts) + "\n"
