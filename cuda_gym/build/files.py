"""Reading an agent's files without following its links: regular files only, bounded, never blocking."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cuda_gym.errors import SnapshotError, UnreadableFileError

Kind = Literal["file", "dir", "link", "special", "missing"]

UnreadableFile = UnreadableFileError
"""The name callers used before the class moved to :mod:`cuda_gym.errors`."""


@dataclass(frozen=True)
class Entry:
    """One path under a root as :func:`walk` found it (``lstat``, never ``stat``).

    Attributes:
        rel: the path relative to the root, POSIX style.
        kind: ``file`` (regular), ``dir``, ``link`` (a symbolic link, never followed) or ``special``
            (FIFO, socket, device).
        size: ``st_size`` of the entry itself.
    """

    rel: str
    kind: Kind
    size: int


def _kind(mode: int) -> Kind:
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "special"


def walk(root: Path, under: str = "", *, recursive: bool = True,
         skip_dirs: frozenset[str] = frozenset({"__pycache__"})) -> Iterator[Entry]:
    """Every non-folder entry below ``root/under`` (sorted, depth first), descending only into real folders.

    A symbolic link is reported as ``link`` and not followed, whatever it points to (a link to the
    host's virtualenv costs nothing); nothing is opened. ``under`` itself must not be a link (see
    :func:`kind_of`): nothing is listed then.
    """
    if under and kind_of(root, under) != "dir":
        return
    stack = [under]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(root / rel_dir if rel_dir else root) as it:
                items = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for item in items:
            rel = f"{rel_dir}/{item.name}" if rel_dir else item.name
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            kind = _kind(st.st_mode)
            if kind == "dir":
                if recursive and item.name not in skip_dirs:
                    stack.append(rel)
                continue
            yield Entry(rel, kind, st.st_size)


def kind_of(root: Path, rel: str) -> Kind:
    """What ``root/rel`` is, checking every component with ``lstat``: a link anywhere on the way is ``link``."""
    rel = posixpath.normpath(rel)
    if rel.startswith("../") or rel == ".." or rel.startswith("/"):
        return "missing"
    path = root
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    kind: Kind = "dir"
    for i, part in enumerate(parts):
        path = path / part
        try:
            kind = _kind(os.lstat(path).st_mode)
        except OSError:
            return "missing"
        if kind == "link":
            return "link"
        if kind != "dir" and i < len(parts) - 1:
            return "missing"
    return kind


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes and not a link.

    Opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` on the open descriptor, so a
    FIFO, a device or a ``/proc`` file behind a name never blocks or is read; raises
    :class:`UnreadableFileError` saying why. (Links in parent folders are the caller's concern: walk
    with :func:`walk` or check with :func:`kind_of`.)
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnreadableFileError(f"{path.name} cannot be opened as a plain file ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFileError(f"{path.name} is not a regular file")
        if st.st_size > limit:
            raise UnreadableFileError(f"{path.name} is larger than {limit} bytes")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                raise UnreadableFileError(f"{path.name} is larger than {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


SNAPSHOT_SUFFIXES = ("", ".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx", ".cuh", ".inl", ".inc",
                     ".tcc", ".ipp")
"""Files a compile can read: sources and anything ``#include`` may name (header suffixes, or none)."""

SNAPSHOT_FILE_LIMIT = 4 * 2**20
"""A larger file is left out of the snapshot (an include of it then fails to compile)."""

SNAPSHOT_TOTAL_LIMIT = 64 * 2**20
SNAPSHOT_MAX_FILES = 4096


@dataclass
class Snapshot:
    """A private copy of the files a compile may read, made by the trusted side.

    Attributes:
        root: the copy's root; compilers run there, so they read nothing the agent can still change.
        hashes: workspace-relative path -> sha256 of every copied file (computed while copying).
        names: basename -> every copied path with that basename (to notice a header that now
            shadows another on the include path).
        skipped: workspace-relative paths left out, and why (links, special files, oversized).
    """

    root: Path
    hashes: dict[str, str]
    names: dict[str, tuple[str, ...]]
    skipped: dict[str, str]


def snapshot(src: Path, dest: Path, *, replace: dict[str, bytes] | None = None) -> Snapshot:
    """Copy the regular source-like files of ``src`` (any depth, links never followed) to ``dest``.

    Args:
        src: the agent's workspace root.
        dest: an empty private folder of the trusted side.
        replace: workspace-relative paths whose content is given here instead of read (the pristine
            infrastructure headers): they are written whatever the workspace holds.

    Raises :class:`SnapshotError` past :data:`SNAPSHOT_TOTAL_LIMIT` bytes or :data:`SNAPSHOT_MAX_FILES`
    files in all.
    """
    import hashlib

    replace = dict(replace or {})
    hashes: dict[str, str] = {}
    skipped: dict[str, str] = {}
    total = 0
    for entry in walk(src):
        if entry.rel in replace or os.path.splitext(entry.rel)[1] not in SNAPSHOT_SUFFIXES:
            continue
        if entry.kind != "file":
            skipped[entry.rel] = "a symbolic link" if entry.kind == "link" else "not a regular file"
            continue
        try:
            data = read_regular(src / entry.rel, SNAPSHOT_FILE_LIMIT)
        except UnreadableFileError as exc:
            skipped[entry.rel] = str(exc)
            continue
        total += len(data)
        if total > SNAPSHOT_TOTAL_LIMIT or len(hashes) >= SNAPSHOT_MAX_FILES:
            raise SnapshotError(f"the workspace holds more than {SNAPSHOT_TOTAL_LIMIT // 2**20} MiB or "
                                f"{SNAPSHOT_MAX_FILES} source-like files; remove generated or data files from it")
        _write(dest / entry.rel, data)
        hashes[entry.rel] = hashlib.sha256(data).hexdigest()
    for rel, data in replace.items():
        _write(dest / rel, data)
        hashes[rel] = hashlib.sha256(data).hexdigest()
    names: dict[str, list[str]] = {}
    for rel in sorted(hashes):
        names.setdefault(posixpath.basename(rel), []).append(rel)
    return Snapshot(dest, hashes, {k: tuple(v) for k, v in names.items()}, skipped)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
