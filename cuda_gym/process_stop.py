"""Stopping a whole process tree from outside it, and letting it go on: every thread of every descendant.

The judge's CPU driver writes each call's inputs into shared memory that the candidate server maps. A
server thread that watched that memory could compute the outputs while the inputs land, before the
driver's clock starts (red team 3, r02). So the driver stops the server's whole tree with ``SIGSTOP``
before it writes the inputs, waits until no thread of it can run user code, starts its clock, and only
then sends ``SIGCONT`` (docs/judge.md, "The CPU window").

``SIGSTOP`` cannot be caught, blocked or ignored. A thread is counted as held once it is stopped, traced,
a zombie or dead, or in uninterruptible sleep (``D``: it is inside the kernel, and the pending stop takes it
before it returns to user code; a ``vfork`` parent waits there until its stopped child execs). A stopped
process cannot fork, so the scan (the root, then the children of each thread of each member, from
``/proc/<pid>/task/<tid>/children``) is repeated until two passes in a row find every thread of every member
held and the members unchanged: a process forked between two scans is found by the next, and a ``SIGCONT``
that a member's system call sent just before that member stopped is seen as a running thread. Orphans of a
sandbox with its own PID namespace are re-parented to its init, which is in the tree; where there is no PID
namespace (the sandbox's ``limits`` mode) a double fork leaves the tree, and the caller adds the members it
knows otherwise (a cgroup's ``cgroup.procs``).

Processes are signalled by PID: one that exits between a scan and its signal and whose PID the host reuses
at once would be signalled by mistake (PIDs wrap after ``/proc/sys/kernel/pid_max``, 4 million by default).
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from cuda_gym.errors import StopTimeout

HELD_STATES = frozenset("tTZXD")
"""Thread states (``/proc/.../stat``'s third field) in which no user code of the thread runs until the stop
is lifted: stopped, traced, zombie, dead, and uninterruptible sleep with the stop pending."""

_GONE = (errno.ENOENT, errno.ESRCH)


def children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (none when it is gone). ``OSError`` when ``/proc`` cannot
    say (no ``children`` files in this kernel, a ``/proc`` that hides other processes)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError as exc:
        if exc.errno in _GONE:
            return out
        raise
    for tid in tids:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError as exc:
            if exc.errno not in _GONE or Path(f"/proc/{pid}/task/{tid}").exists():
                raise  # the thread is there but its children file is not: this kernel cannot list them
    return out


def tree(root: int) -> list[int]:
    """``root`` and every process below it, parents first."""
    seen: list[int] = []
    todo = [root]
    known: set[int] = set()
    while todo:
        pid = todo.pop(0)
        if pid in known:
            continue
        known.add(pid)
        seen.append(pid)
        todo += children(pid)
    return seen


def thread_states(pid: int) -> list[str]:
    """The state letter of each thread of ``pid`` (empty once it is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError as exc:
        if exc.errno in _GONE:
            return []
        raise
    states = []
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError as exc:
            if exc.errno in _GONE:
                continue  # that thread ended
            raise
        states.append(stat.rsplit(")", 1)[1].split(maxsplit=1)[0])
    return states


def held(pid: int) -> bool:
    """Whether no thread of ``pid`` can run user code (``True`` once it is gone)."""
    return all(state in HELD_STATES for state in thread_states(pid))


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def stop_tree(root: int, timeout_s: float, extra: Callable[[], Iterable[int]] | None = None) -> list[int]:
    """``SIGSTOP`` ``root``, its descendants and ``extra()``'s processes, and return once two passes in a row
    saw every thread of each held (``HELD_STATES``) and the same members; the processes signalled, for
    :func:`continue_tree`.

    Raises :class:`StopTimeout` after ``timeout_s`` (the processes signalled are still stopped: the caller
    ends or continues them), and ``OSError`` when ``/proc`` cannot list the tree or its threads here
    (``PermissionError`` when a member may not be signalled)."""
    signalled: list[int] = []
    done: set[int] = set()
    deadline = time.monotonic() + timeout_s
    clean: list[int] | None = None  # the members of the last pass that saw them all held
    pause_s = 0.0001
    while True:
        members = tree(root)
        members += [p for p in (extra() if extra is not None else ()) if p not in members]
        for pid in members:
            if pid not in done:
                _signal(pid, signal.SIGSTOP)
                done.add(pid)
                signalled.append(pid)
        running = [pid for pid in members if not held(pid)]
        if running:
            clean = None
        elif clean == members:
            return signalled
        else:
            clean = members
            continue
        if time.monotonic() > deadline:
            raise StopTimeout(f"{len(running)} of {len(members)} processes were still running after "
                              f"{timeout_s:.1f} s of SIGSTOP")
        for pid in running:  # continued by a member in flight, or a tracer swallowed the first one
            _signal(pid, signal.SIGSTOP)
        time.sleep(pause_s)  # growing: on a loaded machine the members need the CPU to stop
        pause_s = min(pause_s * 2, 0.005)


def continue_tree(pids: Iterable[int]) -> None:
    """``SIGCONT`` each of ``pids`` (those :func:`stop_tree` returned), in their order."""
    for pid in pids:
        _signal(pid, signal.SIGCONT)
