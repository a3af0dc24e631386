"""Helpers shared by the sandbox tests: finding processes that survived a sandbox, probing what a command may do."""

from __future__ import annotations

import os
from pathlib import Path


def survivors(marker: str, program: str | None = None) -> list[int]:
    """Host processes (not zombies) whose command line contains ``marker`` (and that run ``program``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if program is not None and os.path.basename(cmdline.split(" ", 1)[0]) != program:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


def cgroup_here() -> bool:
    """True when the sandbox can make a pids cgroup here (then setsid escapes are caught too)."""
    from cuda_gym.sandbox import _pids_cgroup_parent

    return _pids_cgroup_parent() is not None


NAMESPACE_PROBE = r"""
import ctypes, errno, os, subprocess, sys, threading
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, SIGCHLD = 0x20000, 0x10000000, 0x20000000, 0x40000000, 17
nr = {"x86_64": {"clone": 56, "clone3": 435, "setns": 308}, "aarch64": {"clone": 220, "clone3": 435, "setns": 268}}
nr = nr[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
if sys.argv[1] == "filtered":
    from cuda_gym.judge.syscall_filter import restrict_syscalls
    assert restrict_syscalls()
def err(n):
    return "made" if n >= 0 else errno.errorcode[ctypes.get_errno()]
def in_child(attempt):  # unshare changes its caller, clone makes a child: try each in a fork
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(w, attempt().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return os.read(r, 200).decode()
def clone(flags):  # clone(2) itself, as fork with namespace flags (flags are its first argument on both)
    def attempt():
        pid = libc.syscall(ctypes.c_long(nr["clone"]), ctypes.c_long(flags | SIGCHLD), None, None, None, None)
        if pid == 0:
            os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
        return err(pid)
    return attempt
seen = {name: in_child(lambda f=f: err(libc.unshare(f))) for name, f in
        [("user", CLONE_NEWUSER), ("user+pid", CLONE_NEWUSER | CLONE_NEWPID), ("user+net", CLONE_NEWUSER | CLONE_NEWNET),
         ("mount", CLONE_NEWNS)]}
seen["clone"] = in_child(clone(CLONE_NEWUSER | CLONE_NEWPID))
seen["setns"] = err(libc.syscall(ctypes.c_long(nr["setns"]), os.open("/proc/self/ns/net", os.O_RDONLY), 0))
seen["clone3"] = err(libc.syscall(ctypes.c_long(nr["clone3"]), None, 0))
seen["unshare -Urpf"] = str(subprocess.run(["unshare", "-Urpf", "true"], capture_output=True).returncode)
out = []
t = threading.Thread(target=lambda: out.append("ran"))
t.start()
t.join()
seen["thread"] = out[0]
seen["fork"] = in_child(lambda: "ran")
seen["exec"] = "ran" if subprocess.run(["true"]).returncode == 0 else "failed"
print(sorted(seen.items()))
"""
"""Tries to make and join namespaces, and threads, ``fork`` and ``exec``; prints what it saw. Argument ``filtered``:
install the candidate server's filter first, ``plain``: as it is."""

NAMESPACES_REFUSED = str(sorted({
    "user": "EPERM", "user+pid": "EPERM", "user+net": "EPERM", "mount": "EPERM", "clone": "EPERM", "setns": "EPERM",
    "clone3": "ENOSYS", "unshare -Urpf": "1", "thread": "ran", "fork": "ran", "exec": "ran"}.items()))
"""What :data:`NAMESPACE_PROBE` prints under a filter that refuses namespaces (the sandbox's, the server's)."""
