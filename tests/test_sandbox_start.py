"""Tests of Sandbox.start: a live sandboxed process that the caller talks to over inherited descriptors."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_gym.errors import SandboxError
from cuda_gym.sandbox import Limits, Sandbox, SandboxProcess, available_modes
from sandbox_helpers import cgroup_here, survivors

MODES = available_modes()

ECHO_SERVER = """
import os, socket, sys
fd = int(sys.argv[1])
s = socket.socket(fileno=fd)
print("up", os.getpid(), flush=True)
while True:
    data = s.recv(1024)
    if not data:
        break
    s.sendall(data[::-1])
print("bye", flush=True)
"""


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def _wait_for(pred, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_echo_over_socketpair_keeps_fd_number(mode: str, box: Path) -> None:
    ours, theirs = socket.socketpair()
    # A high number that the child could not have by chance: it must arrive under the same number.
    fd = os.dup2(theirs.fileno(), 77)
    theirs.close()
    try:
        with Sandbox([box], mode=mode).start([sys.executable, "-c", ECHO_SERVER, str(fd)], cwd=box,
                                             pass_fds=[fd], limits=Limits(wall_s=60)) as proc:
            os.close(fd)
            assert isinstance(proc, SandboxProcess) and proc.pid > 0
            ours.settimeout(30)
            for msg in (b"hello", b"sandbox"):
                ours.sendall(msg)
                assert ours.recv(1024) == msg[::-1]
            assert proc.poll() is None
            assert _wait_for(lambda: "up" in proc.output())
            ours.shutdown(socket.SHUT_WR)  # EOF: the server says bye and exits 0 by itself
            assert proc.wait(timeout=30) == 0
        res = proc.result()
        assert res.ok and res.mode == mode and not res.timed_out
        assert "up" in res.output and "bye" in res.output
    finally:
        ours.close()


def test_pipes_in_both_directions(mode: str, box: Path) -> None:
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    code = f"import os; d = os.read({to_child_r}, 100); os.write({from_child_w}, d.upper())"
    with Sandbox([box], mode=mode).start([sys.executable, "-c", code], cwd=box,
                                         pass_fds=(to_child_r, from_child_w)) as proc:
        os.close(to_child_r)
        os.close(from_child_w)
        os.write(to_child_w, b"abc")
        os.close(to_child_w)
        assert os.read(from_child_r, 100) == b"ABC"
        assert proc.wait(timeout=30) == 0
    os.close(from_child_r)


def test_wall_limit_enforced_by_watchdog(mode: str, box: Path) -> None:
    # 3 s: the limit counts from before the sandbox is set up, and the nice-19 shell must print first
    proc = Sandbox([box], mode=mode).start("echo started; sleep 100", cwd=box, limits=Limits(wall_s=3))
    assert proc.poll() is None
    with pytest.raises(SandboxError, match="still running"):
        proc.result()
    assert proc.wait(timeout=10) != 0
    res = proc.result()
    assert res.timed_out and res.reason == "killed after 3 s wall-time limit"
    assert 2.9 < res.seconds < 8 and proc.seconds == res.seconds
    assert res.output.startswith("started")


def test_kill_ends_the_whole_tree(mode: str, box: Path) -> None:
    marker = f"96{os.getpid() % 1000}.{ord(mode[0])}"
    proc = Sandbox([box], mode=mode).start(
        f"sleep {marker}1 & setsid sleep {marker}2 & echo ready; sleep {marker}3", cwd=box,
        limits=Limits(wall_s=math.inf))
    assert _wait_for(lambda: "ready" in proc.output())
    assert _wait_for(lambda: len(survivors(marker)) >= 3), survivors(marker)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.3)
    t0 = time.monotonic()
    proc.kill()
    proc.wait(timeout=10)
    assert time.monotonic() - t0 < 5
    res = proc.result()
    assert res.signal == 9 and not res.timed_out and not res.ok
    if mode == "limits" and not cgroup_here():
        pytest.xfail("limits mode without a cgroup cannot catch setsid escapes")
    assert survivors(marker) == []


def test_context_manager_kills_on_exit(mode: str, box: Path) -> None:
    marker = f"95{os.getpid() % 1000}.{ord(mode[0])}"
    with Sandbox([box], mode=mode).start(f"sleep {marker}", cwd=box, limits=Limits(wall_s=60)) as proc:
        assert _wait_for(lambda: survivors(marker) != [])
    assert proc.poll() is not None and proc.result().signal == 9
    assert survivors(marker) == []


def test_output_captured_while_running_and_capped(mode: str, box: Path) -> None:
    cmd = ("echo FIRST; echo err >&2; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST; "
           "read -t 60 line < /dev/null; sleep 60")
    with Sandbox([box], mode=mode).start(cmd, cwd=box, limits=Limits(output_bytes=100_000)) as proc:
        assert _wait_for(lambda: "LAST" in proc.output())
        text = proc.output()
        assert text.startswith("FIRST\nerr\n") and "bytes of output dropped" in text and len(text) < 101_000
        assert proc.poll() is None
    res = proc.result()
    assert res.output_truncated and res.output.rstrip().endswith("LAST")


def test_main_exit_kills_leftovers_and_reports_status(mode: str, box: Path) -> None:
    marker = f"94{os.getpid() % 1000}.{ord(mode[0])}"
    proc = Sandbox([box], mode=mode).start(f"sleep {marker} & exit 3", cwd=box)
    assert proc.wait(timeout=10) == 3
    assert proc.result().returncode == 3 and proc.result().reason == ""
    assert survivors(marker) == []


def test_run_is_start_and_wait(box: Path) -> None:
    """run() keeps its contract on top of start(): stdin, exit status, output."""
    res = Sandbox([box]).run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], cwd=box,
                             stdin="abc")
    assert res.ok and res.output.strip() == "ABC"


def test_bad_pass_fds_raise(box: Path) -> None:
    sb = Sandbox([box])
    with pytest.raises(SandboxError, match="0-2 are the sandbox's"):
        sb.start("true", cwd=box, pass_fds=[1])
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    with pytest.raises(SandboxError, match="is not open"):
        sb.start("true", cwd=box, pass_fds=[r])
