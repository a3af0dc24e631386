"""A host uid of its own for each sandbox, where this process is root.

The kernel keeps some state per user (real uid), whatever the namespaces: descriptors in flight over Unix
sockets, epoll watches, pipe buffer pages, inotify instances, message queue bytes and the count behind
``RLIMIT_NPROC``. A sandbox that runs as the judge's uid shares that state with the judge and with every
other sandbox, so one submission can use it up for all of them: red team 8 parked thousands of descriptors in
flight (I1: the judge's own descriptor sends refused) and filled the user's epoll watch quota (E1: every
``epoll_ctl`` of the user fails, capable processes too). Where this process is root, every running sandbox
gets a uid that nothing else on the host has, from a reserved range (:data:`DEFAULT_RANGE`, or
``$CUDA_GYM_SANDBOX_UIDS``), held by a lock for its lifetime; the trees it may write are handed to that uid
before it starts (:func:`hand_over`).
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cuda_gym.errors import SandboxError

UIDS_ENV = "CUDA_GYM_SANDBOX_UIDS"
"""``off``, or the first and last uid of the range (``2130706432-2130710527``). Unset: :data:`DEFAULT_RANGE`."""

DEFAULT_RANGE = (0x7F000000, 0x7F000000 + 4095)
"""4,096 uids from 2,130,706,432: above the ranges that distributions, systemd and container tools hand out
(subordinate uids from 100,000, systemd-nspawn up to 1,878,982,656), below ``0x7FFE0000`` and 2**31."""

_CHOWN = shutil.which("chown") or "/bin/chown"
_LOCK_DIRS = (Path("/run/cuda_gym-uids"), Path(tempfile.gettempdir()) / "cuda_gym-uids")


@dataclass(frozen=True)
class UidRange:
    """The uids sandboxes may take, ``first`` to ``last`` inclusive."""

    first: int
    last: int

    def __post_init__(self) -> None:
        if not 1 <= self.first <= self.last < 2**31 - 1:
            raise SandboxError(f"sandbox uid range {self.first}-{self.last}: the uids must be positive, in "
                               f"order and below 2**31 - 1; set {UIDS_ENV}=FIRST-LAST or off")


def configured_range() -> UidRange | None:
    """The range from ``$CUDA_GYM_SANDBOX_UIDS`` (``None`` for ``off``), else :data:`DEFAULT_RANGE`."""
    value = os.environ.get(UIDS_ENV, "").strip()
    if not value:
        return UidRange(*DEFAULT_RANGE)
    if value.lower() == "off":
        return None
    m = re.fullmatch(r"(\d+)-(\d+)", value)
    if not m:
        raise SandboxError(f"{UIDS_ENV}={value!r}: use FIRST-LAST (e.g. {DEFAULT_RANGE[0]}-{DEFAULT_RANGE[1]}) "
                           "or off")
    return UidRange(int(m.group(1)), int(m.group(2)))


NEEDED_CAPABILITIES = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
                       "CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SYS_PTRACE": 19}
"""What root needs for sandboxes of their own uid: to hand them their trees (``CHOWN``), to keep writing into
and removing what they made there (``DAC_OVERRIDE``, ``FOWNER``), to become the uid (``SETUID``, ``SETGID``),
to enter a working directory that is the sandbox's alone before that (``DAC_READ_SEARCH``), and to keep
watching the sandbox's processes in ``/proc`` once they are another user's (``SYS_PTRACE``: their PID
namespace and memory). Red team 9, H3: without ``CHOWN`` every start failed."""


def effective_capabilities() -> int:
    """This process's effective capability set, as the bit mask of ``/proc/self/status``."""
    m = re.search(r"^CapEff:\s*([0-9a-f]+)", Path("/proc/self/status").read_text(), re.M)
    return int(m.group(1), 16) if m else 0


def missing_capabilities() -> list[str]:
    """The names of :data:`NEEDED_CAPABILITIES` this process lacks."""
    caps = effective_capabilities()
    return [name for name, bit in NEEDED_CAPABILITIES.items() if not caps & 1 << bit]


def range_mapped(rng: UidRange) -> bool:
    """Whether this process's user namespace maps every uid of ``rng`` (the root of a rootless container
    often maps only itself)."""
    try:
        lines = Path("/proc/self/uid_map").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        inner, _outer, count = (int(v) for v in line.split())
        if inner <= rng.first and rng.last < inner + count:
            return True
    return False


def separation_available() -> bool:
    """True where sandboxes run as uids of their own: this process is root with
    :data:`NEEDED_CAPABILITIES`, ``setpriv`` is installed, ``$CUDA_GYM_SANDBOX_UIDS`` is not ``off`` and
    its user namespace maps the range."""
    rng = configured_range()
    return (os.geteuid() == 0 and shutil.which("setpriv") is not None and rng is not None
            and not missing_capabilities() and range_mapped(rng))


class TreeClaim:
    """The writable trees of one live sandbox and the uid they were handed to, recorded where every process of
    the host that starts sandboxes sees them, until :meth:`release` (or this process ends)."""

    def __init__(self, uid: int, trees: Sequence[str], entry: Path | None, fd: int | None):
        self.uid = uid
        self.trees = tuple(trees)
        self._entry = entry
        self._fd = fd

    def __repr__(self) -> str:
        return f"TreeClaim(uid={self.uid}, trees={list(self.trees)}, held={self._fd is not None})"

    def release(self) -> None:
        """Free the trees for other sandboxes (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            if self._entry is not None:
                self._entry.unlink(missing_ok=True)
            os.close(fd)


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _live_claims(folder: Path) -> list[tuple[int, list[str]]]:
    """The uid and trees of every claim whose holder lives (it keeps its entry's ``flock``); the entries of
    dead holders are removed. Called with the registry's lock held."""
    live: list[tuple[int, list[str]]] = []
    for entry in os.scandir(folder):
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its sandbox runs
                with os.fdopen(os.dup(fd), "rb") as f:
                    uid, _, trees = f.read().partition(b"\n")
                live.append((int(uid), [os.fsdecode(t) for t in trees.split(b"\0") if t]))
                continue
            os.unlink(entry.path)  # its holder ended without releasing it
        except (OSError, ValueError):
            continue
        finally:
            os.close(fd)
    return live


def claim_trees(trees: Sequence[Path | str], uid: int) -> TreeClaim:
    """Record ``trees`` as handed to ``uid`` for a sandbox about to start. Refused (:class:`SandboxError`) where a
    tree lies in, holds or is one that a live sandbox of another uid writes, in any process of this host: the
    hand-over would take that sandbox's files (red team 9, C1: a torch.compile server beside another lost its
    inductor cache, ``Permission denied``). Sandboxes of the same uid (the caller's) may share a tree.

    Each claim is a file in the lock folder's ``trees`` folder that its holder keeps ``flock``ed, so the kernel
    frees it when the holder dies; claims are made under one lock for the host."""
    names = [os.path.abspath(t) for t in trees]
    if not names:
        return TreeClaim(uid, (), None, None)
    folder = _lock_dir() / "trees"
    folder.mkdir(mode=0o700, exist_ok=True)
    guard = os.open(folder.parent / "trees.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        for owner, held in _live_claims(folder):
            for tree in names:
                clash = next((h for h in held if _overlap(tree, h)), None)
                if owner != uid and clash is not None:
                    raise SandboxError(f"{tree} is writable in a running sandbox (uid {owner}, {clash}): sandboxes "
                                       "of their own uid cannot share a writable tree; run them one after the "
                                       "other, or as the caller's uid (Sandbox(own_uid=False), for trusted code "
                                       "only)")
        fd, entry = tempfile.mkstemp(dir=folder, prefix=f"{uid}.")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, f"{uid}\n".encode() + b"\0".join(os.fsencode(t) for t in names))
        except BaseException:
            os.unlink(entry)
            os.close(fd)
            raise
        return TreeClaim(uid, names, Path(entry), fd)
    finally:
        os.close(guard)


class UidLease:
    """One uid of the range, locked for this process until :meth:`release` (or this process ends), with the
    claim on the writable trees it was handed."""

    def __init__(self, uid: int, lock_fd: int, claim: TreeClaim):
        self.uid = uid
        self.claim = claim
        self._fd: int | None = lock_fd

    def __repr__(self) -> str:
        return f"UidLease(uid={self.uid}, held={self._fd is not None})"

    def release(self) -> None:
        """Free its trees and unlock the uid for the next sandbox (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            self.claim.release()
            os.close(fd)


def _lock_dir() -> Path:
    for folder in _LOCK_DIRS:
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
            info = folder.lstat()
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o077:
                return folder
        except OSError:
            continue
    raise SandboxError(f"no private folder for the sandbox uid locks ({', '.join(map(str, _LOCK_DIRS))}): make "
                       f"one writable by this user alone, or set {UIDS_ENV}=off")


def lease_uid(trees: Sequence[Path] = ()) -> UidLease:
    """Lock a uid of the configured range that no other sandbox of this host holds now, for a sandbox that
    writes ``trees`` (refused while another live sandbox writes one of them: :func:`claim_trees`).

    The locks are ``flock``s on one file per uid in a folder only this user can write, shared by every
    process of the host; the kernel drops them when their holder dies. Raises :class:`SandboxError` when
    every uid of the range is taken (more sandboxes at once than the range holds).
    """
    rng = configured_range()
    if rng is None:
        raise SandboxError(f"sandbox uids are off ({UIDS_ENV}=off)")
    folder = _lock_dir()
    count = rng.last - rng.first + 1
    start = random.randrange(count)
    for i in range(count):
        uid = rng.first + (start + i) % count
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            claim = claim_trees(trees, uid)
        except BaseException:
            os.close(fd)
            raise
        return UidLease(uid, fd, claim)
    raise SandboxError(f"all {count} sandbox uids of {rng.first}-{rng.last} are in use: widen {UIDS_ENV}")


def hand_over(paths: Sequence[Path], uid: int) -> None:
    """Make ``uid`` (and its group) the owner of every entry under ``paths``, links themselves and never their
    targets (``chown -R -P -h``: coreutils' walk takes trees of any depth and path length; a 1,100-folder chain
    broke ``os.walk`` and a 4 KiB path ``os.chown``, red team 9, A1). Raises :class:`SandboxError`."""
    tops = [str(p) for p in paths if os.path.lexists(p)]
    if not tops:
        return
    try:
        done = subprocess.run([_CHOWN, "-R", "-P", "-h", f"{uid}:{uid}", "--", *tops], capture_output=True,
                              text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"could not hand the writable paths to the sandbox's uid {uid}: {exc}") from exc
    if done.returncode != 0:
        raise SandboxError(f"could not hand the writable paths to the sandbox's uid {uid}: "
                           f"{done.stderr.strip()[-500:]}")


def identity_args(uid: int, groups: Sequence[int] = ()) -> list[str]:
    """``setpriv`` options that run the command as ``uid``, its group and ``groups`` alone."""
    group_arg = f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"
    return [f"--reuid={uid}", f"--regid={uid}", group_arg]


_IDENTITIES: dict[int, tuple[tuple[tuple[int, int, int] | None, ...], dict[str, Path]]] = {}
"""Per uid: the host files' identities and the files written for them (:func:`identity_files`)."""


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_mtime_ns, info.st_size


def identity_files(uid: int) -> dict[str, Path]:
    """``/etc/passwd`` and ``/etc/group`` for a sandbox of ``uid``: the host's with a ``sandbox`` user and group
    of that uid added (``getpass.getuser()``, which torch's compile caches call, raises ``KeyError`` for a uid
    without a name). Written into the lock folder once per uid and host content; returns ``{name: path}``."""
    extra = {"passwd": f"sandbox:x:{uid}:{uid}:cuda_gym sandbox:/tmp:/bin/sh\n", "group": f"sandbox:x:{uid}:\n"}
    hosts = {name: Path("/etc", name) for name in extra}
    key = tuple(_identity(h) for h in hosts.values())
    known = _IDENTITIES.get(uid)
    if known is not None and known[0] == key and all(p.is_file() for p in known[1].values()):
        return known[1]
    folder = _lock_dir()
    out: dict[str, Path] = {}
    for name, line in extra.items():
        host = hosts[name]
        text = host.read_text() if host.is_file() else ""
        text = (text if not text or text.endswith("\n") else text + "\n") + line
        path = folder / f"{uid}.{name}"
        if not path.is_file() or path.read_text() != text:
            tmp = folder / f".{uid}.{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o644)
            os.replace(tmp, path)
        out[name] = path
    _IDENTITIES[uid] = (key, out)
    return out
