"""Stopping a whole process tree from outside it, and letting it go on: every thread of every descendant.

The judge's CPU driver writes each call's inputs into shared memory that the candidate server maps. A
server thread that watched that memory could compute the outputs while the inputs land, before the
driver's clock starts (red team 3, r02). So the driver stops the server's whole tree with ``SIGSTOP``
before it writes the inputs, waits until every thread is seen stopped, starts its clock, and only then
sends ``SIGCONT`` (docs/judge.md, "The CPU window").

``SIGSTOP`` cannot be caught, blocked or ignored. A process stopped cannot fork, so the scan (the root,
then the children of each thread of each member, from ``/proc/<pid>/task/<tid>/children``) is repeated
until one finds every thread of every member stopped: a process forked between two scans is found by the
next. Orphans of a sandbox with its own PID namespace are re-parented to its init, which is in the tree;
where there is no PID namespace (the sandbox's ``limits`` mode) a double fork leaves the tree, and the
caller adds the members it knows otherwise (a cgroup's ``cgroup.procs``).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from cuda_gym.errors import StopTimeout

STOPPED_STATES = frozenset("tTZX")
"""Thread states (``/proc/.../stat``'s third field) that run no code: stopped, traced, zombie, dead."""


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (none when it is gone)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def tree(root: int) -> list[int]:
    """``root`` and every process below it, parents first."""
    seen: list[int] = []
    todo = [root]
    known: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in known:
            continue
        known.add(pid)
        seen.append(pid)
        todo += _children(pid)
    return seen


def _all_threads_stopped(pid: int) -> bool:
    """Whether no thread of ``pid`` can run code (``True`` once it is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # that thread ended
        if stat.rsplit(")", 1)[1].split(maxsplit=1)[0] not in STOPPED_STATES:
            return False
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_tree(root: int, timeout_s: float, extra: Callable[[], Iterable[int]] | None = None) -> list[int]:
    """``SIGSTOP`` ``root``, its descendants and ``extra()``'s processes, and return once every thread of
    each is seen stopped; the processes stopped (for :func:`continue_tree`).

    Raises :class:`StopTimeout` after ``timeout_s``, with the processes that did stop still stopped (the
    caller ends them or continues them)."""
    stopped: list[int] = []
    signalled: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        members = tree(root) + [p for p in (extra() if extra is not None else ()) if p not in signalled]
        for pid in members:
            if pid not in signalled:
                _signal(pid, signal.SIGSTOP)
                signalled.add(pid)
                stopped.append(pid)
        running = [pid for pid in members if not _all_threads_stopped(pid)]
        if not running and all(pid in signalled for pid in tree(root)):
            return stopped
        if time.monotonic() > deadline:
            raise StopTimeout(f"{len(running)} of {len(members)} processes were still running after "
                              f"{timeout_s:.1f} s of SIGSTOP")
        for pid in running:  # a tracer may have swallowed the first one
            _signal(pid, signal.SIGSTOP)
        time.sleep(0.0001)


def continue_tree(pids: Iterable[int]) -> None:
    """``SIGCONT`` each of ``pids`` (those :func:`stop_tree` returned)."""
    for pid in pids:
        _signal(pid, signal.SIGCONT)
