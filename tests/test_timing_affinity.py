"""The timing threads are pinned only for a call's window: threads started between calls keep every CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from cuda_gym.judge.driver import ServerSession

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")


def test_window_affinity_pins_both_threads_and_gives_their_cpus_back() -> None:
    mine = os.sched_getaffinity(0)
    a, b = sorted(mine)[:2]
    peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        theirs = os.sched_getaffinity(peer.pid)
        session = object.__new__(ServerSession)  # only the affinity state: no server is started
        session.host_pid, session._cores, session._masks = peer.pid, (a, b), (mine, theirs)
        session._window_affinity(True)
        assert os.sched_getaffinity(0) == {a} and os.sched_getaffinity(peer.pid) == {b}
        session._window_affinity(False)
        assert os.sched_getaffinity(0) == mine and os.sched_getaffinity(peer.pid) == theirs
        # a thread started after the window (an OpenMP pool, a compile worker) inherits every CPU
        seen: list[set[int]] = []
        t = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        t.start()
        t.join()
        assert seen == [mine]
        # the server gone: the driver still gets its own CPUs back
        peer.kill()
        peer.wait()
        session._window_affinity(True)
        session._window_affinity(False)
        assert os.sched_getaffinity(0) == mine
    finally:
        peer.kill()
        os.sched_setaffinity(0, mine)
