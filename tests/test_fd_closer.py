"""The closer process of ``cuda_gym.fd_closer`` (the lingering-socket cases are in test_judge_protocol.py)."""

from __future__ import annotations

import os
import select
import socket

from cuda_gym import fd_closer


def _closed_promptly() -> bool:
    """Hand one end of a socket pair to ``close_fds``; whether the other end sees it closed within 5 s."""
    ours, other = socket.socketpair()
    fd_closer.close_fds([ours.detach()])
    poller = select.poll()
    poller.register(other, select.POLLHUP)
    try:
        return bool(poller.poll(5000))
    finally:
        other.close()


def test_a_forked_child_starts_a_closer_of_its_own() -> None:
    """A child forked after the parent started its closer must not share it: both would send batches on one
    socket and read each other's confirmations (and a child would kill its parent's closer)."""
    assert _closed_promptly()
    parents = fd_closer._STATE["closer"].proc.pid
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        ok = _closed_promptly() and fd_closer._STATE["closer"].proc.pid != parents
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _closed_promptly() and fd_closer._STATE["closer"].proc.pid == parents
