"""The file tools (read, write, edit, multi-edit, glob, grep), confined to the workspace root."""

from __future__ import annotations

import fnmatch
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from cuda_gym.errors import ToolError

try:  # the third-party `regex` module can time out a search; stdlib `re` cannot
    import regex as _regex
except ImportError:  # pragma: no cover - depends on the environment
    _regex = None

logger = logging.getLogger(__name__)


class WorkspaceLike(Protocol):
    """What the file tools need of a ``cuda_gym.workspace.Workspace``."""

    root: Path

    def resolve(self, rel: str) -> Path: ...

    def is_protected(self, path: str | os.PathLike[str]) -> bool: ...


@dataclass(frozen=True)
class FileLimits:
    """Caps of the file tools, so that one call cannot flood the context or stall the episode."""

    max_read_bytes: int = 8 * 1024 * 1024
    """Largest file read_file, edit_file and grep will open."""
    read_chars: int = 15_000
    """Characters of numbered lines read_file shows before it says how to read on."""
    line_chars: int = 2_000
    """Longest line shown by read_file (longer lines are cut)."""
    glob_results: int = 200
    """Most paths glob lists."""
    glob_scan: int = 20_000
    """Most directory entries glob looks at."""
    grep_matches: int = 200
    """Most matching lines grep lists."""
    grep_files: int = 5_000
    """Most files grep opens."""
    grep_line_chars: int = 300
    """Longest matching line grep shows."""
    grep_seconds: float = 5.0
    """Time budget of one grep (the regex search stops when it is spent)."""


DEFAULT_LIMITS = FileLimits()


def _rel(root: Path, path: Path) -> str:
    """``path`` relative to the resolved ``root`` (``.`` for the root itself), else as given."""
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return path.as_posix()


def _read_text(path: Path, rel: str, limits: FileLimits) -> str:
    """The UTF-8 text of the resolved ``path`` (``rel``: the agent's name for it, for messages)."""
    if not path.exists():
        raise ToolError(f"no such file: {rel} (use glob to list the workspace's files)")
    if path.is_dir():
        raise ToolError(f"{rel} is a directory, not a file (use glob '{rel.rstrip('/')}/*' to list it)")
    if not path.is_file():
        raise ToolError(f"{rel} is not a regular file")
    size = path.stat().st_size
    if size > limits.max_read_bytes:
        raise ToolError(f"{rel} is {size} bytes; files over {limits.max_read_bytes} bytes are not opened")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"{rel} is a binary file; only text files can be read or edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{rel} is not UTF-8 text (binary?); only text files can be read or edited") from None


def read_file(ws: WorkspaceLike, path: str, start_line: int = 1, end_line: int | None = None,
              limits: FileLimits = DEFAULT_LIMITS) -> str:
    """Lines ``start_line..end_line`` of a text file, numbered, within ``limits.read_chars``."""
    text = _read_text(ws.resolve(path), path, limits)
    lines = text.splitlines()
    total = len(lines)
    if total == 0:
        return f"{path}: (empty file)"
    if start_line > total:
        raise ToolError(f"start_line {start_line} is past the end of {path} ({total} lines)")
    last = total if end_line is None else min(end_line, total)
    if last < start_line:
        raise ToolError(f"end_line {end_line} is before start_line {start_line}")
    out: list[str] = []
    used = 0
    shown = start_line - 1
    for number in range(start_line, last + 1):
        line = lines[number - 1]
        if len(line) > limits.line_chars:
            line = line[: limits.line_chars] + f" ... [line cut, {len(line)} characters]"
        row = f"{number:6d}\t{line}"
        if out and used + len(row) + 1 > limits.read_chars:
            break
        out.append(row)
        used += len(row) + 1
        shown = number
    footer = f"[{path}: lines {start_line}-{shown} of {total}"
    if shown < last:
        footer += f"; output budget used, call read_file with start_line={shown + 1} to read on"
    return "\n".join(out) + "\n" + footer + "]"


def _check_writable(ws: WorkspaceLike, rel: str) -> Path:
    path = ws.resolve(rel)
    if ws.is_protected(path):
        raise ToolError(
            f"{rel} is a protected file (read-only infrastructure); put your code in model_new.py and "
            "kernels/ instead"
        )
    if path.is_dir():
        raise ToolError(f"{rel} is a directory; give a file path")
    return path


def write_file(ws: WorkspaceLike, path: str, content: str) -> str:
    """Create or overwrite ``path`` with ``content``; parent directories are created inside the root."""
    target = _check_writable(ws, path)
    existed = target.exists()
    root = Path(ws.root).resolve()
    parent = target.parent
    missing = []
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for folder in reversed(missing):
        if root not in folder.parents and folder != root:
            raise ToolError(f"{path} is outside the workspace")
        if folder.is_symlink():
            raise ToolError(f"{_rel(root, folder)} is a symbolic link; write to a real path")
        folder.mkdir()
    if not target.parent.is_dir():
        raise ToolError(f"cannot create {path}: {_rel(root, target.parent)} is not a directory")
    with open(target, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)
    nbytes = len(content.encode("utf-8"))
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"{'overwrote' if existed else 'created'} {path} ({nbytes} bytes, {lines} lines)"


def _apply_edit(text: str, old: str, new: str, replace_all: bool, what: str) -> tuple[str, int, int]:
    """Return the new text, the count replaced and the 1-based line of the first replacement."""
    if old == new:
        raise ToolError(f"{what}: old_string and new_string are identical; nothing to change")
    count = text.count(old)
    if count == 0:
        hint = ""
        if old.strip() and old.strip() in text:
            hint = " (it matches with different leading/trailing whitespace)"
        raise ToolError(
            f"{what}: 0 matches for old_string{hint}. old_string must match the file exactly, whitespace "
            "and indentation included: read_file to see the current text"
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"{what}: {count} matches for old_string, must be unique: include more surrounding lines in "
            "old_string, or set replace_all=true to replace every occurrence"
        )
    first_line = text.count("\n", 0, text.index(old)) + 1
    return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), count, first_line


def _write_back(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def edit_file(ws: WorkspaceLike, path: str, old_string: str, new_string: str, replace_all: bool = False,
              limits: FileLimits = DEFAULT_LIMITS) -> str:
    """Replace ``old_string`` (exact, unique unless ``replace_all``) with ``new_string`` in ``path``."""
    target = _check_writable(ws, path)
    text = _read_text(target, path, limits)
    new_text, count, line = _apply_edit(text, old_string, new_string, replace_all, path)
    _write_back(target, new_text)
    plural = "s" if count > 1 else ""
    return f"edited {path}: replaced {count} occurrence{plural} (first at line {line})"


def multi_edit(ws: WorkspaceLike, path: str, edits: list[dict[str, Any]],
               limits: FileLimits = DEFAULT_LIMITS) -> str:
    """Apply ``edits`` in order to ``path``, all or nothing."""
    target = _check_writable(ws, path)
    text = _read_text(target, path, limits)
    total = 0
    for i, edit in enumerate(edits, start=1):
        text, count, _ = _apply_edit(
            text, edit["old_string"], edit["new_string"], bool(edit.get("replace_all", False)),
            f"{path}, edit {i} of {len(edits)} (nothing was written)",
        )
        total += count
    _write_back(target, text)
    return f"edited {path}: applied {len(edits)} edits ({total} replacements)"


def _check_pattern(pattern: str) -> None:
    if pattern.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", pattern):
        raise ToolError(f"glob pattern {pattern!r} must be relative to the workspace root")
    if ".." in PurePosixPath(pattern).parts:
        raise ToolError(f"glob pattern {pattern!r} must not contain '..'; the workspace root is the top")


def glob(ws: WorkspaceLike, pattern: str, limits: FileLimits = DEFAULT_LIMITS) -> str:
    """Workspace paths matching ``pattern`` (sorted, directories marked with ``/``, capped)."""
    _check_pattern(pattern)
    root = Path(ws.root).resolve()
    found: list[str] = []
    scanned = 0
    stopped = False
    try:
        for match in root.glob(pattern):
            scanned += 1
            if scanned > limits.glob_scan:
                stopped = True
                break
            try:
                real = match.resolve()
            except OSError:
                continue
            if real != root and root not in real.parents:
                continue  # a symlink pointing out of the workspace
            rel = match.relative_to(root).as_posix()
            found.append(rel + "/" if match.is_dir() else rel)
    except (ValueError, NotImplementedError) as exc:
        raise ToolError(f"invalid glob pattern {pattern!r}: {exc}") from None
    if not found:
        return f"no paths match {pattern!r}"
    found.sort()
    lines = found[: limits.glob_results]
    note = f"{len(found)} paths match {pattern!r}"
    if len(found) > len(lines) or stopped:
        note += f" (showing the first {len(lines)}{'; search stopped early' if stopped else ''})"
    return "\n".join(lines) + f"\n[{note}]"


def _compile_regex(pattern: str) -> Any:
    try:
        if _regex is not None:
            return _regex.compile(pattern)
        return re.compile(pattern)
    except Exception as exc:  # re.error and regex.error share no public base beyond Exception
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None


def _files_under(start: Path, limit: int) -> list[Path]:
    if start.is_file():
        return [start]
    files: list[Path] = []
    for folder, dirs, names in os.walk(start, followlinks=False):
        dirs.sort()
        for name in sorted(names):
            files.append(Path(folder) / name)
            if len(files) >= limit:
                return files
    return files


def grep(ws: WorkspaceLike, pattern: str, path: str = ".", glob: str | None = None,
         limits: FileLimits = DEFAULT_LIMITS) -> str:
    """Lines matching the regular expression ``pattern`` in text files under ``path``, as ``file:line: text``."""
    regex = _compile_regex(pattern)
    if glob is not None:
        _check_pattern(glob)
    root = Path(ws.root).resolve()
    start = ws.resolve(path)
    if not start.exists():
        raise ToolError(f"no such file or directory: {path}")
    deadline = time.monotonic() + limits.grep_seconds
    rows: list[str] = []
    matched_files = 0
    total = 0
    timed_out = False
    for file in _files_under(start, limits.grep_files):
        rel = file.relative_to(root).as_posix()
        if glob is not None and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(file.name, glob)):
            continue
        try:
            if file.is_symlink() or not file.is_file() or file.stat().st_size > limits.max_read_bytes:
                continue
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        text = data.decode("utf-8", errors="replace")
        hit = False
        for number, line in enumerate(text.splitlines(), start=1):
            try:
                found = _search(regex, line, deadline)
            except TimeoutError:
                timed_out = True
                break
            if not found:
                continue
            hit = True
            total += 1
            if len(rows) < limits.grep_matches:
                shown = line if len(line) <= limits.grep_line_chars else line[: limits.grep_line_chars] + " ..."
                rows.append(f"{rel}:{number}: {shown}")
        matched_files += hit
        if timed_out:
            break
    if timed_out:
        rows.append(f"[search stopped after {limits.grep_seconds:g} s: simplify the pattern or narrow path/glob]")
    if total == 0:
        return "\n".join(rows + [f"no matches for {pattern!r} in {path}"])
    note = f"{total} matching lines in {matched_files} files"
    if total > limits.grep_matches:
        note += f" (showing the first {limits.grep_matches})"
    return "\n".join(rows) + f"\n[{note}]"


def _search(regex: Any, line: str, deadline: float) -> bool:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    if _regex is not None:
        return regex.search(line, timeout=remaining) is not None
    # Without `regex`, bound the cost of a pathological pattern by bounding the subject length.
    return regex.search(line[:2000]) is not None
