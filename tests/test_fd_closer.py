"""The closer processes of ``cuda_gym.fd_closer`` (the lingering-socket cases are in test_judge_protocol.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from cuda_gym.sandbox_uids import separation_available

# Run without CAP_SYS_RESOURCE and CAP_SYS_ADMIN (a normal user, or root in a default container): only such a
# sender is refused an SCM_RIGHTS message while its user's descriptors in flight pass its RLIMIT_NOFILE.
CHILD = textwrap.dedent(
    r"""
    import errno, os, resource, socket, struct, time
    from cuda_gym.fd_closer import close_fds

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    def send(sock, fds):
        data = struct.pack(f"{len(fds)}i", *fds)
        sock.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, data)], socket.MSG_DONTWAIT)

    null = os.open(os.devnull, os.O_RDONLY)
    box, lid = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    parked = 0
    try:
        while True:
            send(box, [null] * 16)
            parked += 16
    except OSError as exc:
        assert exc.errno == errno.ETOOMANYREFS, exc
    box.close()
    close_fds([lid.detach()])  # its queue holds this user's whole allowance of descriptors in flight
    probe, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    deadline = time.monotonic() + 5
    while True:
        try:
            send(probe, [null])
            break
        except OSError as exc:
            if exc.errno != errno.ETOOMANYREFS or time.monotonic() > deadline:
                raise SystemExit(f"still refused after 5 s: the socket was kept ({parked} parked)")
            time.sleep(0.05)
    print(parked)
    """
)


def _without_caps(argv: list[str]) -> list[str]:
    """``argv`` without CAP_SYS_RESOURCE and CAP_SYS_ADMIN (as root: dropped by setpriv)."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv to drop root's capabilities")
    caps = "-sys_resource,-sys_admin"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", "--", *argv]


def test_a_socket_holding_the_users_descriptors_in_flight_is_closed() -> None:
    """A server parked descriptors in a Unix socket's queue until its user's count passed the limit, then sent
    that socket: handing it to a closer over ``SCM_RIGHTS`` was refused (``ETOOMANYREFS``), so the worker kept
    it, and every later ``SCM_RIGHTS`` send of that user failed, the judge's input arenas included (red team 8,
    I1). A closer that inherits the socket takes it whatever the count, and its exit releases the queue."""
    done = subprocess.run(_without_caps([sys.executable, "-c", CHILD]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0


def test_a_judge_whose_sandboxes_share_its_uid_says_so() -> None:
    """A sandbox of the judge's uid holds that user's count of descriptors in flight for as long as it lives:
    without CAP_SYS_RESOURCE or CAP_SYS_ADMIN the judge's own sends (input arenas, GPU segments) are refused
    meanwhile (red team 8 recheck, V1). As root with the capabilities it needs, each sandbox gets a uid of its
    own (tests/test_sandbox_uids.py); a judge whose sandboxes cannot have one warns, and says why."""
    make = "import logging; logging.basicConfig(); from cuda_gym.judge import Judge; Judge({'device': 'cpu'})"
    warning = "share its per-user kernel state"
    if shutil.which("bwrap") is not None:  # unshare mode needs CAP_SYS_ADMIN: without it, bwrap is the only mode
        exposed = subprocess.run(_without_caps([sys.executable, "-c", make]), capture_output=True, text=True,
                                 timeout=120)
        assert exposed.returncode == 0 and warning in exposed.stderr, exposed.stderr
    if separation_available():  # root with every capability a uid per sandbox needs
        plain = subprocess.run([sys.executable, "-c", make], capture_output=True, text=True, timeout=120)
        assert plain.returncode == 0 and warning not in plain.stderr, plain.stderr
    if os.geteuid() == 0:
        off = subprocess.run([sys.executable, "-c", make], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "CUDA_GYM_SANDBOX_UIDS": "off"})
        assert off.returncode == 0 and warning in off.stderr and "CUDA_GYM_SANDBOX_UIDS=off" in off.stderr, off.stderr
