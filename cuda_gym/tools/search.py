"""glob and grep over the workspace: bounded walks that never follow links, vetted and time-limited patterns.

Both run in the env's own process on patterns the agent chose, so both are bounded before they
start: glob patterns are compiled to one regular expression (adjacent ``**`` merged, wildcards
counted), grep patterns are checked by Python ``re``'s own parser (syntax, repeat counts, expanded
size) and run on the ``regex`` module for its timeout; walks use ``os.scandir`` without entering
linked folders and stop after a number of entries or seconds; only regular files are read. The
budgets are :class:`cuda_gym.tools.files.ToolBudgets`.
"""

from __future__ import annotations

import os
import stat
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import regex as _regex

from cuda_gym.errors import ToolError
from cuda_gym.tools.files import (
    DEFAULT_BUDGETS,
    ToolBudgets,
    WorkspaceLike,
    read_regular,
    regular_size,
    relative_name,
    tool_error_for,
)

try:  # stdlib re's own parser: the syntax whitelist and size check of grep patterns
    from re import _parser as _sre_parse  # type: ignore[attr-defined]  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse


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
            in_class = c != "]"  # `[]` and `[^]` openers were consumed whole below
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
        with warnings.catch_warnings():  # re's FutureWarnings ("possible nested set") are not the agent's news
            warnings.simplefilter("ignore")
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
               budgets: ToolBudgets, strict: bool = False) -> None:
    """Search one file; one that is not a regular file within the budgets is skipped (``strict``:
    the ``ToolError`` saying why is raised, for a file the agent named)."""
    if st.files >= budgets.grep_files:
        st.stopped = f"grep stopped after {budgets.grep_files} files: narrow path or glob"
        return
    try:
        data = read_regular(path, rel, min(budgets.max_file_bytes, budgets.grep_bytes - st.bytes))
    except ToolError:
        if strict:
            raise
        if budgets.grep_bytes - st.bytes < regular_size(path):
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
        raise tool_error_for(exc, path) from None
    deadline = time.monotonic() + budgets.grep_seconds
    state = _GrepState(rows=[])
    if not stat.S_ISDIR(st_start.st_mode):
        _grep_file(compiled, start, relative_name(root, start), state, deadline, budgets, strict=True)
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
