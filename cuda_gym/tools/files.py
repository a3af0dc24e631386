"""The file tools (read, write, edit, multi-edit, glob, grep), confined to the workspace root, within budgets.

These tools run in the env's own process on paths and patterns the agent chose, so each one is
bounded before it starts work: sizes are checked before a result is built, regular expressions are
vetted and time-limited, walks never follow links and stop after a number of entries or seconds.
Only regular files are opened, with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO or a device never blocks
the env), and every write is atomic (encode, write a temporary in the same folder, ``os.replace``).
A budget hit is an error or a note in the observation, never a hang.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import regex as _regex

try:  # stdlib re's own parser: the syntax whitelist and size check of grep patterns
    from re import _parser as _sre_parse  # type: ignore[attr-defined]  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse

from cuda_gym.errors import ToolError
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

def _os_error(exc: OSError, rel: str) -> ToolError:
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
        raise _os_error(exc, rel) from None
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
        raise _os_error(exc, rel) from None
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


def _rel(root: Path, path: Path) -> str:
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


def _existing_size(path: Path) -> int:
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


def workspace_usage(root: Path, max_entries: int) -> tuple[int, int] | None:
    """``(bytes of regular files, entries)`` under ``root``, links not followed; ``None`` past ``max_entries``."""
    total = entries = 0
    stack = [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    entries += 1
                    if entries > max_entries:
                        return None
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
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
            f"the workspace holds more than {budgets.workspace_entries} files and folders; delete what you "
            "do not need (bash rm -r) before writing; nothing was written"
        )
    after = usage[0] - _existing_size(target) + new_size
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
        raise ToolError(f"cannot create {rel}: {_rel(root, parent)} is not a directory")
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except OSError as exc:
            raise _os_error(exc, _rel(root, folder)) from None


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
        raise _os_error(exc, rel) from None
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
        raise _os_error(exc, rel) from None


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


# --- walking the workspace ------------------------------------------------------------------------

@dataclass
class _Walk:
    """A bounded walk of the workspace that never follows links; ``stopped`` says why it ended early."""

    root: Path
    max_entries: int
    deadline: float
    entries: int = 0
    stopped: str = ""

    def run(self, start: Path, max_depth: int | None = None) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """``(path relative to the root, entry)`` under ``start``, depth first, names sorted."""
        stack: list[tuple[str, int]] = [(str(start), 0)]
        while stack:
            folder, depth = stack.pop()
            try:
                with os.scandir(folder) as it:
                    children = sorted(it, key=lambda e: e.name)
            except OSError:
                continue
            below = []
            for entry in children:
                self.entries += 1
                if self.entries > self.max_entries:
                    self.stopped = f"after {self.max_entries} directory entries"
                    return
                if time.monotonic() > self.deadline:
                    self.stopped = "when its time budget was spent"
                    return
                yield os.path.relpath(entry.path, self.root).replace(os.sep, "/"), entry
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if is_dir and (max_depth is None or depth + 1 < max_depth):
                    below.append((entry.path, depth + 1))
            stack.extend(reversed(below))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# --- glob -----------------------------------------------------------------------------------------

_WILD = set("*?[")


def _translate_segment(seg: str) -> tuple[str, int]:
    """A regular expression for one path segment of a glob, and the number of wildcards in it."""
    out, wild, i = [], 0, 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            while i + 1 < len(seg) and seg[i + 1] == "*":
                i += 1
            out.append("[^/]*")
            wild += 1
        elif c == "?":
            out.append("[^/]")
            wild += 1
        elif c == "[":
            end = i + 1
            if end < len(seg) and seg[end] in "!^":
                end += 1
            if end < len(seg) and seg[end] == "]":
                end += 1
            end = seg.find("]", end)
            if end < 0:
                out.append(_regex.escape(c))
            else:
                body = seg[i + 1:end]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\").replace("[", "\\[")
                out.append(f"[{'^/' if negate else ''}{body}]" if body else "(?!)")
                wild += 1
                i = end
        else:
            out.append(_regex.escape(c))
        i += 1
    return "".join(out), wild


def _check_pattern(pattern: str) -> list[str]:
    """The segments of a workspace-relative glob pattern, or a ``ToolError`` for one that escapes."""
    if pattern.startswith(("/", "~")) or _regex.match(r"^[A-Za-z]:[\\/]", pattern):
        raise ToolError(f"glob pattern {pattern!r} must be relative to the workspace root")
    parts = [p for p in PurePosixPath(pattern).parts if p != "."]
    if ".." in parts:
        raise ToolError(f"glob pattern {pattern!r} must not contain '..'; the workspace root is the top")
    return parts


@dataclass(frozen=True)
class _Glob:
    """A compiled glob: the literal folder to start in, the regex for paths, the depth bound."""

    start: str
    regex: Any
    max_depth: int | None


def _compile_glob(pattern: str, budgets: ToolBudgets) -> _Glob:
    """Translate a glob (``**`` = any folders, ``*``/``?``/``[...]`` within one name) to a regex."""
    parts = _check_pattern(pattern)
    merged: list[str] = []
    for part in parts:  # `**/**/**` is one `**`: the nesting that took 295 s is gone
        if part == "**" and merged and merged[-1] == "**":
            continue
        merged.append(part)
    if not merged:
        raise ToolError("empty glob pattern: try '*' or '**/*'")
    stars = merged.count("**")
    pieces, wild = [], stars
    for i, part in enumerate(merged):
        last = i == len(merged) - 1
        if part == "**":
            pieces.append("(?:[^/]+(?:/[^/]+)*)" if last else "(?:[^/]+/)*")
            continue
        text, n = _translate_segment(part)
        wild += n
        pieces.append(text + ("" if last else "/"))
    if stars > budgets.glob_double_stars or wild > budgets.glob_wildcards:
        raise ToolError(
            f"glob pattern {pattern[:80]!r} is too complex ({stars} '**' and {wild} wildcards; at most "
            f"{budgets.glob_double_stars} and {budgets.glob_wildcards}): use a simpler pattern such as '**/*.cpp'"
        )
    if len(merged) >= 2 and merged[-1] == "**":  # `kernels/**`: the folder itself too
        pieces[-2] = pieces[-2][:-1]
        pieces[-1] = "(?:/[^/]+)*"
    literal = []
    for part in merged[:-1]:
        if part == "**" or _WILD & set(part):
            break
        literal.append(part)
    depth = None if stars else len(merged) - len(literal)
    try:
        compiled = _regex.compile("".join(pieces), _regex.DOTALL)
    except _regex.error as exc:
        raise ToolError(f"invalid glob pattern {pattern[:80]!r}: {exc}") from None
    return _Glob("/".join(literal), compiled, depth)


def _timeout(deadline: float) -> float:
    """The ``timeout=`` to give one ``regex`` call so that it ends by ``deadline``.

    Measured: a timed-out search may run up to twice its ``timeout`` (``(x+x+)+y`` on 2,000 x's with
    ``timeout=3`` returned after 5.9 s, with ``timeout=0.5`` after 1.0 s), so each call gets half
    of what is left. Raises ``TimeoutError`` when nothing is left.
    """
    left = deadline - time.monotonic()
    if left <= 0.002:
        raise TimeoutError
    return left / 2


def _fullmatch(compiled: Any, text: str, deadline: float) -> bool:
    return compiled.fullmatch(text, timeout=_timeout(deadline)) is not None


def glob(ws: WorkspaceLike, pattern: str, budgets: ToolBudgets = DEFAULT_BUDGETS) -> str:
    """Workspace paths matching ``pattern`` (sorted, directories marked with ``/``, capped).

    Links are listed as names but never followed.
    """
    spec = _compile_glob(pattern, budgets)
    root = Path(ws.root).resolve()
    start = root / spec.start
    deadline = time.monotonic() + budgets.glob_seconds
    walk = _Walk(root, budgets.glob_entries, deadline)
    found: list[str] = []
    if spec.start and (os.path.islink(start) or not os.path.isdir(start)
                       or os.path.realpath(start) != str(start)):
        return f"no paths match {pattern!r}"
    try:
        for rel, entry in walk.run(start, spec.max_depth):
            if _fullmatch(spec.regex, rel, deadline):
                found.append(rel + "/" if _is_dir(entry) else rel)
    except TimeoutError:
        walk.stopped = "when its time budget was spent"
    note = ""
    if walk.stopped:
        note = (f"glob stopped {walk.stopped} ({budgets.glob_seconds:g} s, {budgets.glob_entries} entries); "
                "use a narrower pattern such as 'kernels/*.cpp'")
    if not found:
        return f"no paths match {pattern!r}" + (f"\n[{note}]" if note else "")
    found.sort()
    lines = found[: budgets.glob_results]
    head = f"{len(found)} paths match {pattern!r}"
    if len(found) > len(lines):
        head += f" (showing the first {len(lines)})"
    return "\n".join(lines) + f"\n[{head}]" + (f"\n[{note}]" if note else "")


# --- grep -----------------------------------------------------------------------------------------

def _pattern_size(seq: Any, budgets: ToolBudgets) -> int:
    """The size of a parsed pattern with counted repeats expanded; refuses counts over the budget."""
    total = 0
    for op, av in seq:
        if str(op).endswith("REPEAT"):
            lo, hi, sub = av
            bounded = hi != _sre_parse.MAXREPEAT
            if lo > budgets.regex_repeat or (bounded and hi > budgets.regex_repeat):
                count = hi if bounded and hi > lo else lo
                raise ToolError(
                    f"grep: the repeat count {count} is over {budgets.regex_repeat}; use a smaller count "
                    "(such as {1,100}) or + and *"
                )
            total += max(hi if bounded else lo, 1) * _pattern_size(sub, budgets)
        else:
            total += 1 + sum(_pattern_size(s, budgets) for s in _subpatterns(av))
        if total > budgets.regex_size:
            break
    return total


def _subpatterns(av: Any) -> Iterator[Any]:
    if isinstance(av, _sre_parse.SubPattern):
        yield av
    elif isinstance(av, (list, tuple)):
        for item in av:
            yield from _subpatterns(item)


def _escape_braces(pattern: str) -> str:
    """Escape every ``{`` that is not a repeat count, as Python's ``re`` reads it literally.

    The ``regex`` module would read ``{e<=1}`` as a fuzzy-match constraint; after this, it reads the
    pattern as ``re`` does.
    """
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if pattern.startswith("\\N{", i):
                end = pattern.find("}", i)
                end = len(pattern) - 1 if end < 0 else end
                out.append(pattern[i:end + 1])
                i = end + 1
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]" or pattern[i - 1] == "["
        elif c == "[":
            in_class = True
            if pattern.startswith("[]", i) or pattern.startswith("[^]", i):
                out.append(pattern[i:i + (2 if pattern[i + 1] == "]" else 3)])
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif c == "{" and not _regex.match(r"\{\d*(?:,\d*)?\}", pattern[i:]):
            out.append("\\{")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def compile_pattern(pattern: str, budgets: ToolBudgets = DEFAULT_BUDGETS) -> Any:
    """A ``regex`` pattern object for a grep pattern in Python ``re`` syntax, vetted for size.

    Raises:
        ToolError: invalid syntax, longer than ``grep_pattern_chars``, a repeat count over
            ``regex_repeat``, or an expanded size over ``regex_size`` (the engine's memory).
    """
    if len(pattern) > budgets.grep_pattern_chars:
        raise ToolError(f"grep: the pattern has {len(pattern)} characters; at most {budgets.grep_pattern_chars}")
    try:
        parsed = _sre_parse.parse(pattern)
    except RecursionError:
        raise ToolError("grep: the pattern is nested too deeply; simplify it") from None
    except Exception as exc:  # re.error, and OverflowError for counts past the engine's limit
        raise ToolError(f"invalid regular expression {pattern[:200]!r}: {exc}") from None
    try:
        size = _pattern_size(parsed, budgets)
    except RecursionError:
        raise ToolError("grep: the pattern is nested too deeply; simplify it") from None
    if size > budgets.regex_size:
        raise ToolError(
            f"grep: the pattern expands to more than {budgets.regex_size} items (nested repeat counts "
            "multiply); use smaller counts, or + and *"
        )
    try:
        return _regex.compile(_escape_braces(pattern))
    except Exception as exc:  # regex.error, or a construct only one engine accepts
        raise ToolError(f"invalid regular expression {pattern[:200]!r}: {exc}") from None


def _search(compiled: Any, line: str, deadline: float) -> bool:
    return compiled.search(line, timeout=_timeout(deadline)) is not None


@dataclass
class _GrepState:
    rows: list[str]
    total: int = 0
    matched_files: int = 0
    files: int = 0
    bytes: int = 0
    stopped: str = ""


def _grep_file(compiled: Any, path: Path, rel: str, st: _GrepState, deadline: float,
               budgets: ToolBudgets) -> None:
    """Search one file (skipped when it is not a regular UTF-8-ish text file within the budgets)."""
    if st.files >= budgets.grep_files:
        st.stopped = f"grep stopped after {budgets.grep_files} files: narrow path or glob"
        return
    try:
        data = read_regular(path, rel, min(budgets.max_file_bytes, budgets.grep_bytes - st.bytes))
    except ToolError:
        if budgets.grep_bytes - st.bytes < _existing_size(path):
            st.stopped = f"grep stopped after reading {st.bytes} bytes (budget {budgets.grep_bytes}): narrow path or glob"
        return
    st.files += 1
    st.bytes += len(data)
    if b"\0" in data[:8192]:
        return
    hit = False
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        try:
            found = _search(compiled, line, deadline)
        except TimeoutError:
            st.stopped = (f"grep stopped: the search took longer than {budgets.grep_seconds:g} s; simplify the "
                          "pattern or narrow path/glob")
            break
        if not found:
            continue
        hit = True
        st.total += 1
        if len(st.rows) < budgets.grep_matches:
            shown = line if len(line) <= budgets.grep_line_chars else line[: budgets.grep_line_chars] + " ..."
            st.rows.append(f"{rel}:{number}: {shown}")
    st.matched_files += hit


def grep(ws: WorkspaceLike, pattern: str, path: str = ".", glob: str | None = None,
         budgets: ToolBudgets = DEFAULT_BUDGETS) -> str:
    """Lines matching the regular expression ``pattern`` in text files under ``path``, as ``file:line: text``.

    Walks never follow links; only regular files are read; the search stops at the budgets of
    files, bytes, matches and seconds, and says so.
    """
    compiled = compile_pattern(pattern, budgets)
    name_filter = _compile_glob(glob, budgets).regex if glob is not None else None
    root = Path(ws.root).resolve()
    start = ws.resolve(path)
    try:
        st_start = os.stat(start)
    except FileNotFoundError:
        raise ToolError(f"no such file or directory: {path}") from None
    except OSError as exc:
        raise _os_error(exc, path) from None
    deadline = time.monotonic() + budgets.grep_seconds
    state = _GrepState(rows=[])
    if not stat.S_ISDIR(st_start.st_mode):
        _grep_file(compiled, start, _rel(root, start), state, deadline, budgets)
    else:
        walk = _Walk(root, budgets.glob_entries, deadline)
        try:
            for rel, entry in walk.run(start):
                if not entry.is_file(follow_symlinks=False):
                    continue
                if name_filter is not None and not (_fullmatch(name_filter, rel, deadline)
                                                    or _fullmatch(name_filter, entry.name, deadline)):
                    continue
                _grep_file(compiled, Path(entry.path), rel, state, deadline, budgets)
                if state.stopped:
                    break
        except TimeoutError:
            state.stopped = f"grep stopped: the search took longer than {budgets.grep_seconds:g} s; narrow path or glob"
        if walk.stopped and not state.stopped:
            state.stopped = f"grep stopped {walk.stopped}: narrow path or glob"
    rows = state.rows
    tail = [f"[{state.stopped}]"] if state.stopped else []
    if state.total == 0:
        return "\n".join([f"no matches for {pattern[:200]!r} in {path}"] + tail)
    note = f"{state.total} matching lines in {state.matched_files} files"
    if state.total > budgets.grep_matches:
        note += f" (showing the first {budgets.grep_matches})"
    return "\n".join(rows + [f"[{note}]"] + tail)


def with_read_chars(budgets: ToolBudgets, read_chars: int) -> ToolBudgets:
    """``budgets`` with ``read_chars`` lowered to at most ``read_chars``."""
    return budgets if budgets.read_chars <= read_chars else replace(budgets, read_chars=read_chars)
