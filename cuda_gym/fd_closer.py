"""Closing descriptors that an untrusted process sent, without ever waiting for them.

Dropping the last reference to a socket may block in the kernel: a TCP socket with ``SO_LINGER`` and unsent
bytes waits for the linger time (up to ``INT_MAX`` s), and a Unix socket drops, with it, every descriptor
waiting in its queue, nested as deep as the kernel allows. A thread that closed such a socket for the judge's
driver was held for the linger time, and every descriptor queued behind it leaked (red team 6, X1; red team
7, D1: the lingering socket hidden beyond a drain's budget or depth). So no socket a peer sent is ever
finally closed in this process: it goes to a **closer process**, and this process drops its own reference
while the closer still holds one. A closer that does not confirm a batch within ``CONFIRM_S`` is killed, and
its exit, with ``SIGKILL`` pending, ends every linger wait at once (a signal breaks the kernel's wait). Other
descriptors (memfds, pipes, files, GPU segments) are closed here.

Everything runs on this process's ``cuda_gym-fd-closer`` job thread, which owns the numbers it is handed.
"""

from __future__ import annotations

import array
import errno
import functools
import logging
import os
import select
import socket
import stat
import subprocess
import sys
from collections.abc import Iterable

from cuda_gym.job_thread import job_thread

log = logging.getLogger(__name__)

CONFIRM_S = 1.0
"""How long the closer process may take to confirm that it closed a batch before it is killed."""
START_S = 30.0
"""How long a new closer process may take to start."""
_BATCH = 253  # the most descriptors one message may carry (SCM_MAX_FD)

# The closer process (``python -S``: no site, no package import; about 15 ms to start). A batch comes in
# messages ``f`` (descriptors, kept) and ends with ``c`` (close what is kept, then confirm): the sender drops
# its own references between the two, so the last reference is always the closer's.
_CLOSER = r"""
import array, os, socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
s.send(b"r")
kept = []
while True:
    data, anc, _, _ = s.recvmsg(1, socket.CMSG_SPACE(253 * 4))
    if not data:
        break
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            kept += array.array("i", payload[: len(payload) - len(payload) % 4])
    if data == b"c":
        for fd in kept:
            try:
                os.close(fd)
            except OSError:
                pass
        kept = []
        s.send(b"k")
"""


class _Closer:
    """The closer process and this process's end of its socket."""

    def __init__(self) -> None:
        from cuda_gym.sandbox import killed_with_this_process, spawn

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # From the spawner thread, behind a parent-death signal: it dies with this process.
            self.proc = spawn(killed_with_this_process([sys.executable, "-S", "-c", _CLOSER, str(theirs.fileno())]),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              pass_fds=(theirs.fileno(),), close_fds=True)
        finally:
            theirs.close()
        self.sock = ours
        self.dead = False
        # Started (an interpreter's start on a loaded machine may take a while): from here on, every batch
        # must be confirmed within CONFIRM_S.
        ready, _, _ = select.select([ours], [], [], START_S)
        if not ready or ours.recv(1) != b"r":
            log.warning("the descriptor closer (pid %d) did not start within %.0f s: killed", self.proc.pid, START_S)
            self.kill()
        ours.settimeout(CONFIRM_S)

    def hand_over(self, fds: list[int]) -> tuple[list[int], list[int]]:
        """Send ``fds`` to the closer, drop this process's references to those it took, and wait for its
        confirmation (else kill it: its death ends the wait, and it has taken them). Returns the descriptors
        the kernel would not let a message carry (a Unix socket whose queue nests others too deep:
        ``ETOOMANYREFS``), which stay open here, and those left unsent because the closer failed (still this
        process's: the caller replaces the closer and hands them over again)."""
        sent: list[int] = []
        refused: list[int] = []
        unsent = list(fds)
        try:
            while unsent:
                chunk = unsent[:_BATCH]
                try:
                    self._send(chunk)
                    sent += chunk
                except OSError as exc:
                    if exc.errno != errno.ETOOMANYREFS:
                        raise
                    for fd in chunk:  # find the ones the kernel refuses
                        try:
                            self._send([fd])
                            sent.append(fd)
                        except OSError as one:
                            if one.errno != errno.ETOOMANYREFS:
                                raise
                            refused.append(fd)
                del unsent[:len(chunk)]
        except OSError as exc:
            log.warning("the descriptor closer failed (%s): it is replaced", exc)
            unsent = [fd for fd in unsent if fd not in sent and fd not in refused]
        finally:
            for fd in sent:  # in flight or held by the closer: not the last reference
                _close_quietly(fd)
        confirmed = False
        if not unsent:
            try:
                self.sock.send(b"c")
                ready, _, _ = select.select([self.sock], [], [], CONFIRM_S)
                confirmed = bool(ready) and self.sock.recv(1) == b"k"
            except OSError:
                pass
        if not confirmed:
            log.warning("the descriptor closer (pid %d) did not confirm within %.1f s: killed", self.proc.pid, CONFIRM_S)
            self.kill()
        return refused, unsent

    def _send(self, fds: list[int]) -> None:
        self.sock.sendmsg([b"f"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())])

    def kill(self) -> None:
        """Kill the closer: its exit drops what it holds without waiting (a linger wait ends on ``SIGKILL``)."""
        self.dead = True
        self.sock.close()
        self.proc.kill()
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            log.warning("the descriptor closer (pid %d) did not exit within 5 s of SIGKILL", self.proc.pid)


_STATE: dict[str, _Closer] = {}
# A forked child starts a closer of its own: the parent's, and the confirmations on its socket, are the parent's.
os.register_at_fork(after_in_child=_STATE.clear)
KEPT: list[int] = []
"""Sockets no message could carry to the closer (``ETOOMANYREFS``): kept open, never closed here."""


def _close_all(others: list[int], sockets: list[int]) -> None:
    for fd in others:
        _close_quietly(fd)
    if sockets:
        _close_sockets(sockets)


def _close_sockets(sockets: list[int]) -> None:
    for _ in range(2):
        closer = _STATE.get("closer")
        if closer is None or closer.dead or closer.proc.poll() is not None:
            closer = _STATE["closer"] = _Closer()
        refused, sockets = closer.hand_over(sockets)
        KEPT.extend(refused)
        if not sockets:
            return
    log.warning("no descriptor closer took %d sockets: they stay open", len(sockets))
    KEPT.extend(sockets)


def close_fds(fds: Iterable[int]) -> None:
    """Close every descriptor of ``fds`` (already closed ones are skipped) without ever waiting for one, on
    this process's closer thread: sockets through the closer process, the others here. The caller must not
    use or close them again."""
    sockets: list[int] = []
    others: list[int] = []
    for fd in fds:
        try:
            (sockets if stat.S_ISSOCK(os.fstat(fd).st_mode) else others).append(fd)
        except OSError:
            continue  # already closed
    if sockets or others:
        job_thread("cuda_gym-fd-closer").submit(functools.partial(_close_all, others, sockets))


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
