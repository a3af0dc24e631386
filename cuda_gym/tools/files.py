"""The file tools (read, write, edit, multi-edit) and their budgets, confined to the workspace root.

These tools run in the env's own process on paths the agent chose, so each one is bounded before
it starts work: sizes are checked before a result is built (glob and grep, in
:mod:`cuda_gym.tools.search`, share the budgets). Only regular files are opened, with
``O_NOFOLLOW | O_NONBLOCK`` (a FIFO or a device never blocks the env), and every write is atomic
(encode, write a temporary in the same folder, ``os.replace``). A budget hit is an error or a note
in the observation, never a hang.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from cuda_gym.errors import ToolError, TreeUnwalkable
from cuda_gym.trees import MAX_DEPTH, walk_tree
from cuda_gym.workspace import NOFOLLOW_READ

logger = logging.getLogger(__name__)

MIB = 1024 * 1024


class WorkspaceLike(Protocol):
    """What the file tools need of a ``cuda_gym.workspace.Workspace``."""

    root: Path

    def resolve(self, rel: str) -> Path: ...

    def is_protected(self, path: str | os.PathLike[str]) -> bool: ...


@dataclass(frozen=True)
class ToolBudgets:
    """Time, memory and output budgets of the file tools (``ToolRunner(budgets=...)``).

    Every tool call runs in the env's process, so none may take unbounded time or memory whatever
    its arguments; docs/tools.md says what the agent sees when a budget is hit.
    """

    max_file_bytes: int = 8 * MIB
    """Largest file read_file, edit_file, multi_edit and grep open, and largest file a write or an
    edit may produce (checked before the new text is built)."""
    workspace_bytes: int = 256 * MIB
    """Most bytes of regular files under the workspace root after a write_file, edit_file or multi_edit."""
    workspace_entries: int = 50_000
    """Most files and folders the workspace may hold for a write to be measured (and accepted)."""
    read_chars: int = 15_000
    """Characters of numbered lines read_file shows before it says how to read on."""
    line_chars: int = 2_000
    """Longest line shown by read_file (longer lines are cut)."""
    glob_results: int = 200
    """Most paths glob lists."""
    glob_entries: int = 20_000
    """Most directory entries glob (and grep's walk) visits."""
    glob_wildcards: int = 12
    """Most wildcards (``*``, ``**``, ``?``, ``[...]``) in one glob pattern."""
    glob_double_stars: int = 3
    """Most ``**`` segments in one glob pattern (after merging adjacent ones)."""
    glob_seconds: float = 2.0
    """Time budget of one glob."""
    grep_matches: int = 200
    """Most matching lines grep lists."""
    grep_files: int = 5_000
    """Most files grep opens."""
    grep_bytes: int = 64 * MIB
    """Most bytes grep reads in one call."""
    grep_line_chars: int = 300
    """Longest matching line grep shows."""
    grep_seconds: float = 5.0
    """Time budget of one grep (the regex search is stopped when it is spent)."""
    grep_pattern_chars: int = 1_000
    """Longest grep pattern."""
    regex_repeat: int = 1_000
    """Largest repeat count in a grep pattern (``a{1000}``); the regex engine allocates per repeat."""
    regex_size: int = 20_000
    """Largest size of a grep pattern with every counted repeat expanded (``(a{100}){100}`` is 10,000)."""


DEFAULT_BUDGETS = ToolBudgets()


# --- safe file access -----------------------------------------------------------------------------

def tool_error_for(exc: OSError, rel: str) -> ToolError:
    """A ``ToolError`` for an ``OSError`` on the agent's path ``rel`` that says what to do."""
    if exc.errno == errno.ELOOP:
        return ToolError(f"{rel} is a symbolic link (or a loop of links); the file tools open real files only")
    if exc.errno == errno.ENAMETOOLONG:
        return ToolError(f"{rel[:80]}...: the path or one of its names is too long")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{rel}: a folder on the path is a file, not a directory")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ToolError(f"{rel}: permission denied (did a bash command chmod it? chmod u+rwX it back)")
    if exc.errno == errno.ENOSPC or exc.errno == errno.EDQUOT:
        return ToolError(f"{rel}: no space left for the workspace; delete files you do not need")
    return ToolError(f"{rel}: {exc.strerror or type(exc).__name__}")


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def read_regular(path: Path, rel: str, max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, opened without following a link and without blocking.

    Raises:
        ToolError: no such file, a directory/FIFO/device/link, larger than ``max_bytes``, unreadable.
    """
    try:
        fd = os.open(path, NOFOLLOW_READ)
    except FileNotFoundError:
        raise ToolError(f"no such file: {rel} (use glob to list the workspace's files)") from None
    except OSError as exc:
        raise tool_error_for(exc, rel) from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{rel} is a directory, not a file (use glob '{rel.rstrip('/')}/*' to list it)")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{rel} is {_kind(st.st_mode)}, not a regular file; only regular files are opened")
        if st.st_size > max_bytes:
            raise ToolError(f"{rel} is {st.st_size} bytes; files over {max_bytes} bytes are not opened")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(max_bytes + 1 - total, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # it grew while we read
            raise ToolError(f"{rel} is over {max_bytes} bytes; files that large are not opened")
        return b"".join(chunks)
    except OSError as exc:
        raise tool_error_for(exc, rel) from None
    finally:
        os.close(fd)


def _decode(data: bytes, rel: str) -> str:
    if b"\0" in data[:8192]:
        raise ToolError(f"{rel} is a binary file; only text files can be read or edited")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{rel} is not UTF-8 text (binary?); only text files can be read or edited") from None


def _encode(text: str, what: str) -> bytes:
    """``text`` as UTF-8, or a ``ToolError`` naming the first lone surrogate (nothing is written)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise ToolError(
            f"{what} holds a lone surrogate (\\u{ord(bad):04x}) at character {exc.start}, which is not valid "
            "UTF-8; send valid Unicode text (nothing was written)"
        ) from None


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _read_text(path: Path, rel: str, budgets: ToolBudgets) -> str:
    """The UTF-8 text of the resolved ``path`` (``rel``: the agent's name for it, for messages)."""
    return _decode(read_regular(path, rel, budgets.max_file_bytes), rel)


def relative_name(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` (``.`` for the root itself), else as given."""
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return path.as_posix()


# --- read -----------------------------------------------------------------------------------------

def read_file(ws: WorkspaceLike, path: str, start_line: int = 1, end_line: int | None = None,
              budgets: ToolBudgets = DEFAULT_BUDGETS) -> str:
    """Lines ``start_line..end_line`` of a text file, numbered, within ``budgets.read_chars``."""
    text = _read_text(ws.resolve(path), path, budgets)
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
        if len(line) > budgets.line_chars:
            line = line[: budgets.line_chars] + f" ... [line cut, {len(line)} characters]"
        row = f"{number:6d}\t{line}"
        if out and used + len(row) + 1 > budgets.read_chars:
            break
        out.append(row)
        used += len(row) + 1
        shown = number
    footer = f"[{path}: lines {start_line}-{shown} of {total}"
    if shown < last:
        footer += f"; output budget used, call read_file with start_line={shown + 1} to read on"
    return "\n".join(out) + "\n" + footer + "]"


# --- write, edit, multi-edit ----------------------------------------------------------------------

def _check_writable(ws: WorkspaceLike, rel: str) -> Path:
    path = ws.resolve(rel)
    if ws.is_protected(path):
        raise ToolError(
            f"{rel} is a protected file (read-only infrastructure); put your code in model_new.py and "
            "kernels/ instead"
        )
    if path == Path(ws.root).resolve() or os.path.isdir(path):
        raise ToolError(f"{rel} is a directory; give a file path")
    return path


def regular_size(path: Path) -> int:
    """The size of ``path`` when it is itself a regular file (links not followed), else 0."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def workspace_usage(root: Path, max_entries: int) -> tuple[int, int] | None:
    """``(bytes of regular files, entries)`` under ``root``, links not followed (:func:`~cuda_gym.trees.walk_tree`);
    ``None`` past ``max_entries`` or for a tree that cannot be walked whole (deeper than
    :data:`~cuda_gym.trees.MAX_DEPTH` folders, or unreadable)."""
    total = entries = 0
    try:
        for entry in walk_tree(root):
            entries += 1
            if entries > max_entries:
                return None
            if stat.S_ISREG(entry.stat.st_mode):
                total += entry.stat.st_size
    except TreeUnwalkable:
        return None
    return total, entries


def _check_budget(ws: WorkspaceLike, target: Path, rel: str, new_size: int, budgets: ToolBudgets) -> None:
    """Refuse a write of ``new_size`` bytes to ``target`` over the file or workspace budget."""
    if new_size > budgets.max_file_bytes:
        raise ToolError(
            f"{rel} would be {new_size} bytes, over the budget of {budgets.max_file_bytes} bytes per file; "
            "nothing was written (keep sources small; generate large data at run time)"
        )
    usage = workspace_usage(Path(ws.root), budgets.workspace_entries)
    if usage is None:
        raise ToolError(
            f"the workspace holds more than {budgets.workspace_entries} files and folders (or folders nested deeper "
            f"than {MAX_DEPTH}); delete what you "
            "do not need (bash rm -r) before writing; nothing was written"
        )
    after = usage[0] - regular_size(target) + new_size
    if after > budgets.workspace_bytes:
        raise ToolError(
            f"writing {rel} would bring the workspace to {after} bytes, over its budget of "
            f"{budgets.workspace_bytes} bytes; delete files you do not need (bash rm); nothing was written"
        )


def _make_parents(ws: WorkspaceLike, target: Path, rel: str) -> None:
    """Create the missing folders above ``target``, refusing links and files in the way."""
    root = Path(ws.root).resolve()
    missing = []
    parent = target.parent
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = parent.parent
    if parent != root and root not in parent.parents:
        raise ToolError(f"{rel} is outside the workspace")
    if not os.path.isdir(parent) or os.path.islink(parent):
        raise ToolError(f"cannot create {rel}: {relative_name(root, parent)} is not a directory")
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except OSError as exc:
            raise tool_error_for(exc, relative_name(root, folder)) from None


def _write_atomic(target: Path, data: bytes, rel: str) -> None:
    """Write ``data`` to a fresh temporary beside ``target`` and rename it over ``target``.

    The temporary is made with ``O_EXCL`` (never a link the agent planted); the old file stays as it
    was until the rename, so a failure leaves it intact. An existing file keeps its permission bits.
    """
    try:
        mode = stat.S_IMODE(os.lstat(target).st_mode)
    except OSError:
        mode = 0o644
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:40]}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise tool_error_for(exc, rel) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise tool_error_for(exc, rel) from None


def write_file(ws: WorkspaceLike, path: str, content: str, budgets: ToolBudgets = DEFAULT_BUDGETS) -> str:
    """Create or overwrite ``path`` with ``content`` (atomically); parent folders are created inside the root."""
    target = _check_writable(ws, path)
    data = _encode(content, "content")
    _check_budget(ws, target, path, len(data), budgets)
    existed = os.path.lexists(target)
    _make_parents(ws, target, path)
    _write_atomic(target, data, path)
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"{'overwrote' if existed else 'created'} {path} ({len(data)} bytes, {lines} lines)"


def _apply_edit(text: str, size: int, old: str, new: str, replace_all: bool, what: str,
                budgets: ToolBudgets) -> tuple[str, int, int, int]:
    """Return the new text, its UTF-8 size, the count replaced and the 1-based line of the first replacement.

    ``size`` is the UTF-8 size of ``text``; the result's size is checked before the text is built.
    """
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
            f"{what}: {count} matches for old_string, must be unique: include more surrounding "
            "lines in old_string, or set replace_all=true to replace every occurrence"
        )
    new_size = size + count * (_utf8_len(new) - _utf8_len(old))
    if new_size > budgets.max_file_bytes:
        raise ToolError(
            f"{what}: replacing {count} occurrence{'s' if count > 1 else ''} would make the file {new_size} "
            f"bytes, over the budget of {budgets.max_file_bytes} bytes per file"
        )
    first_line = text.count("\n", 0, text.index(old)) + 1
    return (text.replace(old, new) if replace_all else text.replace(old, new, 1)), new_size, count, first_line


def edit_file(ws: WorkspaceLike, path: str, old_string: str, new_string: str, replace_all: bool = False,
              budgets: ToolBudgets = DEFAULT_BUDGETS) -> str:
    """Replace ``old_string`` (exact, unique unless ``replace_all``) with ``new_string`` in ``path``."""
    target = _check_writable(ws, path)
    _encode(new_string, "new_string")
    data = read_regular(target, path, budgets.max_file_bytes)
    text = _decode(data, path)
    new_text, _, count, line = _apply_edit(text, len(data), old_string, new_string, replace_all,
                                              f"{path} (nothing was written)", budgets)
    payload = _encode(new_text, f"the edited {path}")
    _check_budget(ws, target, path, len(payload), budgets)
    _write_atomic(target, payload, path)
    plural = "s" if count > 1 else ""
    return f"edited {path}: replaced {count} occurrence{plural} (first at line {line})"


def multi_edit(ws: WorkspaceLike, path: str, edits: list[dict[str, Any]],
               budgets: ToolBudgets = DEFAULT_BUDGETS) -> str:
    """Apply ``edits`` in order to ``path``, all or nothing."""
    target = _check_writable(ws, path)
    for i, edit in enumerate(edits, start=1):
        _encode(edit["new_string"], f"new_string of edit {i}")
    data = read_regular(target, path, budgets.max_file_bytes)
    text = _decode(data, path)
    size = len(data)
    total = 0
    for i, edit in enumerate(edits, start=1):
        text, size, count, _ = _apply_edit(
            text, size, edit["old_string"], edit["new_string"], bool(edit.get("replace_all", False)),
            f"{path}, edit {i} of {len(edits)} (nothing was written)", budgets,
        )
        total += count
    payload = _encode(text, f"the edited {path}")
    _check_budget(ws, target, path, len(payload), budgets)
    _write_atomic(target, payload, path)
    return f"edited {path}: applied {len(edits)} edits ({total} replacements)"


def with_read_chars(budgets: ToolBudgets, read_chars: int) -> ToolBudgets:
    """``budgets`` with ``read_chars`` lowered to at most ``read_chars``."""
    return budgets if budgets.read_chars <= read_chars else replace(budgets, read_chars=read_chars)
