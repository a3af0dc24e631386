"""Init of an ``unshare`` sandbox: builds its private root from a mount plan, then runs the command.

Run by :mod:`cuda_gym.sandbox` as ``python -I -S _sandbox_init.py PLAN_JSON -- COMMAND...`` as the
first process (PID 1) of fresh mount, PID, IPC, UTS, cgroup (and network) namespaces made by
``unshare``. It uses the standard library only (no site, no ``cuda_gym`` import: it starts in a few
milliseconds). The plan is the same list of mount steps that bwrap mode turns into bwrap arguments,
so both modes show the same tree:

- a tmpfs becomes the new root; each step binds, mounts or links something into it (read-only binds
  are read-only on every submount too: NVIDIA's container runtime binds single driver libraries
  below ``/usr``);
- ``pivot_root`` into it and detach the host's tree, so nothing else of the host stays reachable;
- fork the command (PID 1 must not be the command: it would ignore default signals), reap orphans,
  exit with the command's status; the kernel then kills whatever is left in the PID namespace.

A failed step prints ``sandbox setup: ...`` and exits 125, which the caller turns into a
``SandboxError``.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import signal
import socket
import struct
import sys

SETUP_FAILED = 125
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217}
_FLAG_NAMES = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024, "nodiratime": 2048,
               "relatime": 1 << 21}
"""Per-mount flags a bind remount keeps: inside a user namespace (a rootless container) the kernel
refuses a remount that would clear one inherited from outside."""
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2", "core": "/proc/kcore", "ptmx": "pts/ptmx"}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class _SetupError(Exception):
    """A mount step failed."""


def _b(s: str | None) -> bytes | None:
    return None if s is None else os.fsencode(s)


def mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2), raising :class:`_SetupError` with the errno's text."""
    if _libc.mount(_b(src), _b(dst), _b(fstype), flags, _b(data)) != 0:
        err = ctypes.get_errno()
        raise _SetupError(f"mount {src or fstype} on {dst}: {os.strerror(err)}")


def _mounts_under(path: str) -> list[tuple[str, int]]:
    """Mount points at or below ``path`` with their per-mount nosuid/nodev/noexec flags."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            if point == path or point.startswith(path.rstrip("/") + "/"):
                flags = sum(v for k, v in _FLAG_NAMES.items() if k in fields[5].split(","))
                found.append((point, flags))
    return found


def _make_point(dst: str, like: str) -> None:
    """Create the mount point ``dst`` in the new root: a directory, or a file when ``like`` is not a dir."""
    if os.path.isdir(like):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.lexists(dst):
            open(dst, "w").close()


def bind(root: str, src: str, dst: str, readonly: bool, dev: bool = False) -> None:
    """Bind host ``src`` (with its submounts) at ``root + dst``, nosuid (and nodev unless ``dev``) and
    read-only on every submount if asked."""
    target = root + dst
    _make_point(target, src)
    mount(src, target, None, MS_BIND | MS_REC)
    for point, flags in _bound_mounts(src, target):
        extra = flags | MS_NOSUID | (0 if dev else MS_NODEV) | (MS_RDONLY if readonly else 0)
        mount(None, point, None, MS_REMOUNT | MS_BIND | extra)


_host_mounts: list[tuple[str, int]] = []
"""The host's mount points and flags, read once before the first mount (one read, not one per bind)."""


def _bound_mounts(src: str, target: str) -> list[tuple[str, int]]:
    """The mounts a recursive bind of ``src`` made at ``target``, with the flags each one copied."""
    real = os.path.realpath(src)
    under = [(p, f) for p, f in _host_mounts if p.startswith(real.rstrip("/") + "/")]
    top = max((m for m in _host_mounts if real == m[0] or real.startswith(m[0].rstrip("/") + "/")),
              key=lambda m: len(m[0]), default=("/", 0))
    return [(target, top[1]), *((target + p[len(real):], f) for p, f in under)]


def tmpfs(root: str, dst: str, size: int | None, mode: str = "755") -> None:
    """A fresh tmpfs at ``root + dst``, bounded to ``size`` bytes when given."""
    target = root + dst
    os.makedirs(target, exist_ok=True)
    opts = f"mode={mode}" + (f",size={size}" if size else "")
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, opts)


def make_dev(root: str, nodes: list[str]) -> None:
    """A minimal ``/dev``: a small tmpfs with bound device nodes, the usual links and a private devpts."""
    d = root + "/dev"
    tmpfs(root, "/dev", 2**20)
    for name in nodes:
        bind(root, "/dev/" + name, "/dev/" + name, readonly=False, dev=True)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{d}/{name}")
    os.makedirs(d + "/shm", exist_ok=True)
    os.makedirs(d + "/pts", exist_ok=True)
    try:
        mount("devpts", d + "/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620")
    except _SetupError:
        pass  # no ptys then, as on some hardened hosts


def remount_ro(target: str) -> None:
    """Make the mount at ``target`` read-only (its submounts keep their own flags)."""
    flags = next((f for p, f in _mounts_under(target) if p == target), 0)
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def apply(root: str, step: list) -> None:
    """Carry out one step of the mount plan inside ``root``."""
    kind, args = step[0], step[1:]
    if kind == "ro":
        bind(root, args[0], args[1], readonly=True)
    elif kind == "ro-try":  # a link made since the plan was written is not followed either
        if os.path.exists(args[0]) and not os.path.islink(args[0]):
            bind(root, args[0], args[1], readonly=True)
    elif kind == "rw":
        bind(root, args[0], args[1], readonly=False)
    elif kind == "dev-bind":
        bind(root, args[0], args[1], readonly=False, dev=True)
    elif kind == "symlink":
        os.makedirs(os.path.dirname(root + args[1]), exist_ok=True)
        os.symlink(args[0], root + args[1])
    elif kind == "tmpfs":
        tmpfs(root, args[0], args[1], args[2] if len(args) > 2 else "755")
    elif kind == "proc":
        os.makedirs(root + args[0], exist_ok=True)
        mount("proc", root + args[0], "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    elif kind == "proc-ro":
        target = root + args[0]
        if os.path.exists(target):
            mount(target, target, None, MS_BIND | MS_REC)
            remount_ro(target)
    elif kind == "dev":
        make_dev(root, args[0])
    elif kind == "remount-ro":
        remount_ro(root.rstrip("/") + args[0] if args[0] != "/" else root)
    else:
        raise _SetupError(f"unknown mount step {kind!r}")


def pivot(root: str, use_pivot_root: bool = True) -> None:
    """Make ``root`` the root of this mount namespace and drop the host's tree."""
    nr = _PIVOT_ROOT.get(os.uname().machine) if use_pivot_root else None
    os.chdir(root)
    if nr is not None and _libc.syscall(nr, b".", b".") == 0:
        if _libc.umount2(b".", MNT_DETACH) != 0:
            raise _SetupError(f"detaching the host root: {os.strerror(ctypes.get_errno())}")
    else:
        # No pivot_root (unknown architecture, or EINVAL where / is the initramfs rootfs): move the new
        # root over / and chroot into it, as switch_root does. The host's tree stays below, out of reach
        # of a command without CAP_SYS_CHROOT (setpriv drops it).
        err = ctypes.get_errno() if nr is not None else 0
        if err not in (0, errno.EINVAL):
            raise _SetupError(f"pivot_root: {os.strerror(err)}")
        mount(".", "/", None, 8192)  # MS_MOVE
        os.chroot(".")
    os.chdir("/")


def loopback_up() -> None:
    """Bring up ``lo`` in the fresh network namespace (bwrap does the same)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", 1 | 8 | 64))  # SIOCSIFFLAGS: UP|LOOPBACK|RUNNING


def run(argv: list[str]) -> int:
    """Fork and exec ``argv``, reap every orphan, return the command's exit status."""
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):  # Python changed these at startup
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execv(argv[0], argv)
        except OSError as exc:
            os.write(2, f"sandbox: cannot run {argv[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    while True:
        try:
            wpid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 1
        if wpid == pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def main() -> None:
    """Entry point: ``_sandbox_init.py PLAN_JSON -- COMMAND...``."""
    plan = json.loads(sys.argv[1])
    argv = sys.argv[sys.argv.index("--") + 1:]
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    root = plan["root"]
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        _host_mounts.extend(_mounts_under("/"))
        mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
        for step in plan["steps"]:
            apply(root, step)
        pivot(root, plan.get("pivot_root", True))
        if plan.get("loopback"):
            loopback_up()
        os.chdir(plan["cwd"])
    except (_SetupError, OSError) as exc:
        text = str(exc) if isinstance(exc, _SetupError) else f"{exc.filename or ''}: {exc.strerror or exc}"
        if isinstance(exc, OSError) and exc.errno == errno.ENOENT and exc.filename == plan.get("cwd"):
            text = f"working directory {plan['cwd']} is not in the sandbox"
        os.write(2, f"sandbox setup: {text}\n".encode())
        os._exit(SETUP_FAILED)
    os._exit(run(argv))


if __name__ == "__main__":
    main()
