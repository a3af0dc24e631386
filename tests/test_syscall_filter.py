"""The candidate server's seccomp filter (``cuda_gym.judge.syscall_filter``), on real processes: no userfault
descriptor and no new namespace for the server, its threads (those torch started before the filter too) or
its children; threads, ``fork`` and ``exec`` go on working."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuda_gym.judge.syscall_filter import server_filter
from sandbox_helpers import NAMESPACE_PROBE, NAMESPACES_REFUSED

pytestmark = pytest.mark.skipif(server_filter(platform.machine()) is None,
                                reason="the filter is built for x86-64 and aarch64 only")

TRY_USERFAULTFD = """
import ctypes, os, platform, sys, threading, time
from cuda_gym.judge.syscall_filter import restrict_syscalls
from cuda_gym.seccomp_bpf import ARCHES
NR = ARCHES[platform.machine()].userfaultfd
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
    assert restrict_syscalls()
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
        assert session.filtered
        status = Path(f"/proc/{session.host_pid}/status").read_text()
        assert "Seccomp:\t2" in status, status
    finally:
        session.close()


INT80 = r"""
#include <stdio.h>
int main(void) {
    long ret;  /* i386 userfaultfd (374) through the 32-bit entry, from a 64-bit process */
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(374L), "b"(0x80000L | 1L) : "memory");
    printf("%ld\n", ret);
    return 0;
}
"""

RUN_FILTERED = """
import os, sys
from cuda_gym.judge.syscall_filter import restrict_syscalls
assert restrict_syscalls()
os.execv(sys.argv[1], sys.argv[1:])
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the 32-bit entry of x86-64")
def test_the_32_bit_and_x32_entries_are_refused_too(tmp_path: Path) -> None:
    """A number-only filter passes ``int $0x80`` (arch i386, userfaultfd 374) and x32's numbers: the filter
    refuses every syscall of another ABI."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "int80.c").write_text(INT80)
    subprocess.run([cc, "-O0", "-o", str(tmp_path / "int80"), str(tmp_path / "int80.c")], check=True)
    plain = subprocess.run([str(tmp_path / "int80")], capture_output=True, text=True, check=True).stdout.strip()
    filtered = subprocess.run([sys.executable, "-c", RUN_FILTERED, str(tmp_path / "int80")], capture_output=True,
                              text=True, check=True).stdout.strip()
    if plain == "-38":  # ENOSYS: this kernel has no 32-bit entry (ia32 emulation off)
        pytest.skip("no 32-bit syscall entry on this kernel")
    assert int(plain) >= 0, plain  # a userfault descriptor through the 32-bit entry, unfiltered
    assert filtered == "-1", filtered  # -EPERM
    x32 = subprocess.run([sys.executable, "-c", TRY_X32], capture_output=True, text=True, check=True).stdout.strip()
    assert x32 == "Operation not permitted", x32


TRY_X32 = """
import ctypes, os
from cuda_gym.judge.syscall_filter import X32_SYSCALL_BIT, restrict_syscalls
assert restrict_syscalls()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(X32_SYSCALL_BIT | 323, os.O_CLOEXEC | 1)
print("fd" if fd >= 0 else os.strerror(ctypes.get_errno()))
"""


TRY_DEVICE = """
import fcntl, os, sys
from cuda_gym.judge.syscall_filter import USERFAULTFD_IOC_NEW, restrict_syscalls
fd = os.open("/dev/userfaultfd", os.O_RDWR | os.O_CLOEXEC)
if sys.argv[1] == "filtered":
    assert restrict_syscalls()
try:
    print("fd" if fcntl.ioctl(fd, USERFAULTFD_IOC_NEW, os.O_CLOEXEC) >= 0 else "?")
except OSError as exc:
    print(exc.strerror)
"""


def test_the_userfaultfd_device_is_refused_too() -> None:
    """``/dev/userfaultfd`` (the host's ``/dev`` in the sandbox's ``limits`` mode) makes a descriptor by ``ioctl``."""
    import os

    if not os.access("/dev/userfaultfd", os.R_OK | os.W_OK):
        pytest.skip("no usable /dev/userfaultfd here")
    plain = subprocess.run([sys.executable, "-c", TRY_DEVICE, "plain"], capture_output=True, text=True).stdout.strip()
    if plain != "fd":
        pytest.skip(f"the device makes no descriptor here ({plain})")
    filtered = subprocess.run([sys.executable, "-c", TRY_DEVICE, "filtered"], capture_output=True, text=True,
                              check=True).stdout.strip()
    assert filtered == "Operation not permitted", filtered


def test_the_filter_refuses_new_namespaces_but_not_threads_fork_or_exec() -> None:
    """A child in a nested user namespace pinned 12,000 network namespaces whose teardown outlived the
    sandbox's kill (red team 6, X2); ``clone3`` fails with ``ENOSYS`` and the C library falls back to
    ``clone`` for threads and ``posix_spawn``."""
    run = lambda mode: subprocess.run([sys.executable, "-c", NAMESPACE_PROBE, mode], capture_output=True,  # noqa: E731
                                      text=True, check=True).stdout.strip()
    plain = run("plain")
    if "'made'" not in plain:
        pytest.skip(f"this host makes no user namespace anyway ({plain}): nothing to show")
    assert run("filtered") == NAMESPACES_REFUSED
