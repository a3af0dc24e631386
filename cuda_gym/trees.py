"""Walking and removing folders that untrusted code wrote: any depth, links never followed.

An agent's command, a candidate server or a single file's import can leave anything in the folders it
may write (a workspace, a job folder, a sandbox's private ``/tmp``): a chain of folders thousands deep,
folders without read or write permission, links to the host. Python 3.11's ``shutil.rmtree`` recurses
once per level and raises ``RecursionError`` past about a thousand, even with ``ignore_errors=True``
(red team 3: a candidate's 1500-deep chain in its job folder made ``Judge.evaluate`` raise after its
verdict and left the folder on disk). coreutils' ``rm -rf`` walks any depth without following links;
what it cannot remove (a folder its owner made unreadable, for a non-root caller) is opened up with
``chmod -R u+rwx`` (which does not follow links either) and removed again.

:func:`walk_tree` lists such a folder by directory descriptor (any path length) down to :data:`MAX_DEPTH`
folders and raises :class:`TreeUnwalkable` for what it cannot see whole: every count of what untrusted code
wrote (the sandbox's disk and entries limits, the tools' workspace budgets) takes a tree it cannot walk as
over its bound.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cuda_gym.errors import TreeUnwalkable

log = logging.getLogger(__name__)

_RM = shutil.which("rm") or ""
_CHMOD = shutil.which("chmod") or ""


def _run(argv: list[str]) -> None:
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove ``path`` and everything under it; ``True`` when nothing is left.

    Never raises and never follows a link (a link named ``path`` is removed, not its target). Without
    coreutils (no ``rm`` on ``PATH``) it falls back to ``shutil.rmtree``, which may leave a very deep
    tree behind.
    """
    target = Path(path)
    if not os.path.lexists(target):
        return True
    if not _RM:
        try:
            if target.is_symlink() or not target.is_dir():
                target.unlink()
            else:
                shutil.rmtree(target, ignore_errors=True)
        except (OSError, RecursionError):
            pass
    else:
        _run([_RM, "-rf", "--one-file-system", "--", str(target)])
        if os.path.lexists(target) and _CHMOD and not target.is_symlink():
            _run([_CHMOD, "-R", "u+rwx", "--", str(target)])  # what its owner locked, opened for its owner
            _run([_RM, "-rf", "--one-file-system", "--", str(target)])
    if os.path.lexists(target):
        log.warning("could not remove %s", target)
        return False
    return True


MAX_DEPTH = 64
"""How deep :func:`walk_tree` follows folders: a tree with an entry below 64 folders is refused as a whole
(one descriptor pair per level stays open while a level is walked)."""


@dataclass(frozen=True)
class TreeEntry:
    """One entry under a walked root: its path components below the root and its ``lstat``."""

    parts: tuple[str, ...]
    stat: os.stat_result

    @property
    def rel(self) -> str:
        """The path below the root, ``/``-joined (it may be longer than ``PATH_MAX``)."""
        return "/".join(self.parts)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def walk_tree(root: str | os.PathLike[str], max_depth: int = MAX_DEPTH) -> Iterator[TreeEntry]:
    """Every entry under the folder ``root`` (not ``root`` itself), each folder's entries as they come and
    then those below, by directory descriptor: paths of any length, links never followed. Nothing for a
    ``root`` that is missing or not a folder; an entry removed while the walk passes is skipped.

    Raises :class:`TreeUnwalkable` at an entry deeper than ``max_depth`` folders or at a part that cannot be
    read: a walk by path names skipped everything below a 4 KiB path (``ENAMETOOLONG``), so a sandbox's
    300 MiB and 5,000 files there passed a 64 MiB and 1,000-entry limit (red team 10, F1)."""
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return
        raise TreeUnwalkable(f"{root}: {exc.strerror}") from exc
    stack: list[tuple[int, Iterator[os.DirEntry[str]], tuple[str, ...]]] = []
    try:
        stack.append((top, os.scandir(top), ()))
        while stack:
            fd, entries, parts = stack[-1]
            try:
                entry = next(entries, None)
                if entry is None:
                    stack.pop()
                    _close_level(fd, entries)
                    continue
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise TreeUnwalkable(f"{'/'.join(parts) or '.'}: {exc.strerror}") from exc
            here = (*parts, entry.name)
            if len(here) > max_depth:
                raise TreeUnwalkable(f"folders nested deeper than {max_depth}")
            yield TreeEntry(here, info)
            if stat.S_ISDIR(info.st_mode):
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
                        continue  # removed, or replaced by a file or a link, since it was listed
                    raise TreeUnwalkable(f"{'/'.join(here)}: {exc.strerror}") from exc
                try:
                    stack.append((child, os.scandir(child), here))
                except OSError as exc:
                    os.close(child)
                    raise TreeUnwalkable(f"{'/'.join(here)}: {exc.strerror}") from exc
    finally:
        for fd, entries, _ in stack:
            _close_level(fd, entries)


def _close_level(fd: int, entries: Iterator[os.DirEntry[str]]) -> None:
    close = getattr(entries, "close", None)
    if close is not None:
        close()
    os.close(fd)
