"""The candidate server's seccomp filter (``cuda_gym.judge.syscall_filter``), on real processes: no userfault
descriptor for the server, its threads (those torch started before the filter too) or its children."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuda_gym.judge.syscall_filter import is_filtered, userfaultfd_filter

pytestmark = pytest.mark.skipif(userfaultfd_filter(platform.machine()) is None,
                                reason="the filter is built for x86-64 and aarch64 only")

TRY_USERFAULTFD = """
import ctypes, os, platform, sys, threading, time
from cuda_gym.judge.syscall_filter import _ARCH, deny_userfaultfd
NR = _ARCH[platform.machine()][1]
libc = ctypes.CDLL(None, use_errno=True)
def attempt():
    fd = libc.syscall(NR, os.O_CLOEXEC | 1)  # UFFD_USER_MODE_ONLY: allowed to unprivileged processes too
    return "fd" if fd >= 0 else os.strerror(ctypes.get_errno())
seen = {}
started = threading.Event()
def early():  # a thread that exists before the filter
    started.set()
    time.sleep(0.3)
    seen["thread"] = attempt()
t = threading.Thread(target=early)
t.start()
started.wait()
if sys.argv[1] == "filtered":
    assert deny_userfaultfd()
seen["main"] = attempt()
t.join()
r, w = os.pipe()
if os.fork() == 0:
    os.write(w, attempt().encode())
    os._exit(0)
os.wait()
seen["child"] = os.read(r, 100).decode()
print(sorted(seen.items()))
"""


def _attempts(mode: str) -> str:
    return subprocess.run([sys.executable, "-c", TRY_USERFAULTFD, mode], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_filter_refuses_userfaultfd_to_every_thread_and_child() -> None:
    unfiltered = _attempts("plain")
    if "fd" not in unfiltered:
        pytest.skip(f"userfaultfd is refused here anyway ({unfiltered}): nothing to show")
    assert unfiltered == str([("child", "fd"), ("main", "fd"), ("thread", "fd")])
    refused = "Operation not permitted"
    assert _attempts("filtered") == str([("child", refused), ("main", refused), ("thread", refused)])


def test_a_candidate_server_runs_under_the_filter(tmp_path: Path) -> None:
    from cuda_gym.judge.driver import ServerSession, ServerSpec
    from cuda_gym.paths import package_pythonpath
    from cuda_gym.sandbox import Limits

    spec = ServerSpec(device="cpu", job_dir=tmp_path, cache_root=tmp_path / "cache", writable=[tmp_path],
                      env={"PYTHONPATH": package_pythonpath()}, limits=Limits(wall_s=120.0))
    session = ServerSession(spec)
    session.start(None)
    try:
        session.calibrate(torch.zeros(64), lambda: [torch.randn(64)], 1 << 16)
        assert is_filtered(session.host_pid)
    finally:
        session.close()
