"""Running untrusted commands: bubblewrap/unshare isolation, per-sandbox limits, capped output."""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import platform
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cuda_gym.errors import SandboxError, TreeUnwalkable
from cuda_gym.host import find_cuda_home
from cuda_gym.job_thread import job_thread
from cuda_gym.process_stop import continue_tree, stop_tree
from cuda_gym.sandbox_uids import (
    UIDS_ENV,
    TreeClaim,
    UidLease,
    claim_trees,
    configured_range,
    hand_over,
    identity_args,
    identity_files,
    lease_uid,
    missing_capabilities,
    range_mapped,
    separation_available,
)
from cuda_gym.seccomp_bpf import sandbox_filter
from cuda_gym.trees import remove_tree, walk_tree

logger = logging.getLogger(__name__)

SandboxMode = Literal["bwrap", "unshare", "limits"]
MODES: tuple[SandboxMode, ...] = ("bwrap", "unshare", "limits")
MODE_ENV = "CUDA_GYM_SANDBOX"
"""Environment variable that forces a mode (``bwrap``, ``unshare`` or ``limits``). ``limits`` (resource
limits only, no isolation) is used only when forced: with neither bwrap nor unshare working,
:func:`sandbox_mode` raises rather than run agent code with weaker isolation."""

GiB = 2**30
PASSTHROUGH_ENV = ("CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "LD_LIBRARY_PATH")
"""Host variables copied into the sandbox when set (none of them is a secret)."""

ETC_FILES = (
    "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts",
    "host.conf", "resolv.conf", "gai.conf", "protocols", "services", "ssl", "ca-certificates",
    "alternatives", "localtime", "timezone", "os-release", "bash.bashrc", "inputrc", "mime.types",
    "gcrypt", "OpenCL", "vulkan", "nvidia",
)
"""The parts of ``/etc`` a sandbox sees (compilers, Python, CUDA and name lookup need these)."""

PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "acpi", "scsi", "fs", "driver", "kcore", "keys")
"""Parts of a fresh ``/proc`` made read-only: the sandbox runs as host uid 0 without capabilities, and
uid 0 may write host-global sysctls and ``sysrq-trigger`` by file permission alone."""
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
"""Device nodes of the minimal ``/dev`` (NVIDIA nodes are added for ``gpu=True``)."""

_SETUP_FAILED = 125
_INIT = Path(__file__).with_name("_sandbox_init.py")
"""The init of unshare mode: builds the private root from the mount plan, then runs the command."""
_KILL_GRACE_S = 2.0
_DISK_CHECK_S = 1.0
"""Seconds between two checks of the writable paths' size and entries while a command with ``disk_bytes``
or ``entries`` runs."""
_MEMORY_CHECK_S = 0.5
"""Seconds between two sums of the sandbox's memory where no memory cgroup holds it."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed command. ``None`` switches a limit off."""

    wall_s: float = 60.0
    """Wall-clock seconds before the whole process tree is killed (``math.inf``: never, for a long-lived
    :meth:`Sandbox.start` server that its owner kills)."""
    cpu_s: float | None = None
    """CPU seconds per process (RLIMIT_CPU); ``None`` means ``2 * wall_s`` (room for multi-threaded
    processes: the wall limit is the real bound)."""
    memory_bytes: int | None = 8 * GiB
    """Memory of the whole sandbox: its processes together, their tmpfs files included (a cgroup
    ``memory.max``/``memory.limit_in_bytes`` where one can be made; else the sum of its processes' PSS,
    checked every half second, which stops the command past it); and of each process (RLIMIT_AS
    for CPU runs; RLIMIT_DATA for ``gpu=True`` runs, because CUDA reserves terabytes of virtual address
    space that RLIMIT_AS would refuse)."""
    processes: int | None = 512
    """Processes and threads of the whole command: a cgroup ``pids.max`` where one can be made,
    else RLIMIT_NPROC (counted per user namespace under bwrap; not enforced for root without a cgroup)."""
    file_bytes: int | None = 4 * GiB
    """Largest file a process may write (RLIMIT_FSIZE)."""
    open_files: int | None = 4096
    """Open file descriptors per process (RLIMIT_NOFILE)."""
    output_bytes: int = 2**20
    """Output kept in memory: the first and last halves of this many bytes; the middle is dropped."""
    tmpfs_bytes: int | None = 1 * GiB
    """Size of each private tmpfs (``/tmp``, ``/dev/shm``, ``/run``) in bwrap and unshare modes."""
    disk_bytes: int | None = 8 * GiB
    """Bytes the writable paths may hold together (allocated blocks, links not followed): checked about
    every second while the command runs (over it, the command is killed) and when it ends; ``reason``
    says so. The files stay: the caller decides what to do with them. For the bash tool the writable
    path is the workspace, so this bounds the workspace across the steps of an episode."""
    nice: int = 19
    """Scheduling niceness of every process of the sandbox (``nice -n``). Agent commands, builds and
    single-file recordings run at 19, so that on a shared machine they never compete with the judge's
    timed servers, which run at 0 (``judge.procedure``): a hostile import in a pool's recorder that
    spun every CPU slowed the cached baseline of a task about 14x (red team, 2026-12-01).

    ``nice`` alone does not do it: every sandbox starts a session of its own, and where the kernel groups
    sessions (``kernel.sched_autogroup_enabled``) a niceness counts only inside its session's group, so a
    nice-19 spinner took half a CPU from a nice-0 one (red team 3). A sandbox with a niceness above 0 is
    therefore also put in a ``cpu`` cgroup of the weight that niceness has (``cpu.shares`` 15 of 1024 for
    19 on cgroup v1, ``cpu.weight`` 1 of 100 on v2), where one can be made; ``cpu_weight_applies()`` says
    whether it can here. Elsewhere the niceness is also written to the session's group
    (``/proc/self/autogroup``)."""
    entries: int | None = 1_000_000
    """Files, folders and links the writable paths may hold together (links not followed): checked with
    ``disk_bytes``, about every second while the command runs and when it ends; ``reason`` says so. Empty
    files allocate no blocks, so ``disk_bytes`` alone lets a command make millions of them, and every
    later walk of the folder (a build's snapshot, a removal) then takes minutes. The bash tool sets
    the file tools' ``workspace_entries`` budget (50,000); the default bounds every other sandbox
    (a judge's writable caches included)."""

    def effective_cpu_s(self) -> float:
        """The CPU limit in force: ``cpu_s``, or twice the wall limit when it is ``None``."""
        return self.cpu_s if self.cpu_s is not None else 2 * self.wall_s


@dataclass
class RunResult:
    """What a sandboxed command did."""

    returncode: int
    """Exit status; ``128 + n`` (or ``-n``) when killed by signal ``n``."""
    output: str
    """Stdout and stderr merged, UTF-8 decoded with replacement, middle cut past the output cap."""
    timed_out: bool
    """True when the wall-time limit killed the command."""
    reason: str
    """A sentence naming the limit that stopped the command, else ``""``."""
    seconds: float
    """Wall-clock seconds from start to the end of the process tree."""
    signal: int | None = None
    """The signal that ended the command, when one did (inferred from ``returncode``)."""
    output_truncated: bool = False
    """True when the middle of the output was dropped by the output cap."""
    mode: str = ""
    """The sandbox mode the command ran under."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0 and no limit stopped it."""
        return self.returncode == 0 and not self.reason


# --------------------------------------------------------------------------- mode detection


def _bwrap_isolation_args(network: bool, own_uid: bool) -> list[str]:
    """bwrap's namespaces and capabilities. As root with a uid per sandbox (:mod:`cuda_gym.sandbox_uids`),
    no user namespace: bwrap keeps only what ``setpriv`` needs to become the sandbox's uid (a user namespace
    would map the sandbox to this process's uid, whose per-user kernel state it would then share)."""
    if own_uid:
        args = ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try",
                *([] if network else ["--unshare-net"]), "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        # CAP_DAC_READ_SEARCH: the working directory may be the sandbox uid's alone by then (chdir comes
        # before setpriv); setpriv's change of uid clears every capability.
        caps = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH")
        return args + [a for cap in caps for a in ("--cap-add", cap)]
    # As root in a user namespace, bwrap keeps every capability there, enough to remount the read-only
    # binds writable: drop them all.
    return ["--unshare-all", *(["--share-net"] if network else []), "--die-with-parent", "--new-session",
            "--cap-drop", "ALL"]


def _bwrap_parent_dirs(dst: str, made: set[str], bound: bool) -> list[str]:
    """``--dir`` steps (mode 0755) for the parents of ``dst`` that are neither made yet nor inside a bind, and
    ``dst`` recorded in ``made`` (a bind's target as ``dst/``: what lies below comes from the host). bwrap
    makes missing parents with mode 0700, which only uid 0 may enter: with a uid per sandbox,
    ``/root/.pyenv/...`` would be out of the sandbox's reach."""
    out: list[str] = []
    for parent in reversed(Path(dst).parents):
        name = str(parent)
        if name != "/" and name not in made and not any(name.startswith(m) for m in made if m.endswith("/")):
            out += ["--perms", "0755", "--dir", name]
            made.add(name)
    made.update([dst, dst.rstrip("/") + "/"] if bound else [dst])
    return out


def _bwrap_base_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = Path("/") / name
        if p.is_symlink():
            args += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            args += ["--ro-bind", str(p), str(p)]
    return args


@functools.cache
def _bwrap_probe(own_uid: bool) -> bool:
    """Whether bwrap runs a command here, as a uid of its own (no user namespace) or as this process's."""
    exe = shutil.which("bwrap")
    rng = configured_range()
    if exe is None or (own_uid and rng is None):
        return False
    payload = [_SETPRIV, *identity_args(rng.first), *_SETPRIV_DROP] if own_uid and rng is not None else []
    cmd = [exe, *_bwrap_isolation_args(network=False, own_uid=own_uid), *_bwrap_base_args(), "--proc", "/proc",
           "--dev", "/dev", "--tmpfs", "/tmp", "--remount-ro", "/", *payload, "/bin/sh", "-c", "exit 0"]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=20, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        logger.info("bwrap probe failed: %s", exc)
        return False
    if proc.returncode != 0:
        logger.info("bwrap probe (own uid: %s) failed (%d): %s", own_uid, proc.returncode,
                    proc.stderr.decode(errors="replace").strip())
    return proc.returncode == 0


def own_uid_available(mode: SandboxMode) -> bool:
    """Whether sandboxes of ``mode`` run as host uids of their own here (:mod:`cuda_gym.sandbox_uids`; bwrap
    only where it starts without a user namespace)."""
    return mode != "limits" and separation_available() and (mode == "unshare" or _bwrap_probe(True))


def _bwrap_works() -> bool:
    return (separation_available() and _bwrap_probe(True)) or _bwrap_probe(False)


@functools.cache
def _unshare_works() -> bool:
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "setpriv")):
        return False
    try:
        tmp = Path(tempfile.mkdtemp(prefix="cuda_gym_probe_"))
        try:
            res = Sandbox([tmp], mode="unshare").run("touch ok && ! touch /probe_ro 2>/dev/null", cwd=tmp,
                                                     limits=Limits(wall_s=20))
            good = res.returncode == 0 and (tmp / "ok").exists()
            if not good:
                logger.info("unshare probe failed (%d): %s", res.returncode, res.output.strip()[-500:])
            return good
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except (OSError, SandboxError) as exc:
        logger.info("unshare probe failed: %s", exc)
        return False


@functools.cache
def _detect_mode(forced: str | None) -> SandboxMode:
    if forced:
        if forced not in MODES:
            raise SandboxError(f"{MODE_ENV}={forced!r} is not a sandbox mode: use one of {', '.join(MODES)}")
        if forced == "bwrap" and not _bwrap_works():
            raise SandboxError(f"{MODE_ENV}=bwrap but bubblewrap does not work here: install `bwrap` "
                               f"(package bubblewrap) or set {MODE_ENV}=unshare or limits")
        if forced == "unshare" and not _unshare_works():
            raise SandboxError(f"{MODE_ENV}=unshare but `unshare` isolation does not work here (it needs root, "
                               f"util-linux and mount rights): set {MODE_ENV}=limits or install bubblewrap")
        mode: SandboxMode = forced
    elif _bwrap_works():
        mode = "bwrap"
    elif _unshare_works():
        mode = "unshare"
    else:
        raise SandboxError("no isolating sandbox works here: install bubblewrap (apt-get install bubblewrap), or "
                           "run as root with util-linux (unshare, setpriv, mount, prlimit); to run agent code with "
                           f"resource limits only and no isolation, set {MODE_ENV}=limits")
    if mode == "unshare":
        logger.info("sandbox mode is 'unshare' (bubblewrap not usable): same isolation, built by the package's "
                    "own init (see docs/sandbox.md)")
    elif mode == "limits":
        logger.warning("sandbox mode is 'limits' (%s=limits): only resource limits, no filesystem, network or "
                       "process isolation; use it only for trusted code", MODE_ENV)
    return mode


def available_modes() -> list[SandboxMode]:
    """Every mode that works on this machine, strongest first (``limits`` always works, when forced)."""
    works: tuple[tuple[SandboxMode, bool], ...] = (("bwrap", _bwrap_works()), ("unshare", _unshare_works()),
                                                   ("limits", True))
    return [m for m, ok in works if ok]


def sandbox_mode() -> SandboxMode:
    """The isolation used here: ``bwrap``, else ``unshare``, or what ``$CUDA_GYM_SANDBOX`` forces.

    The probe runs once per process. Raises :class:`SandboxError` when no isolating mode works and
    ``limits`` is not forced.
    """
    return _detect_mode(os.environ.get(MODE_ENV) or None)


# --------------------------------------------------------------------------- cgroup pids limit


def _mount_points(fstype: str | None = None, option: str | None = None) -> list[Path]:
    """Mount points of this mount namespace: all of them, or those of ``fstype`` (with super option ``option``)."""
    found: list[Path] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5:
            continue
        if fstype is not None and not (len(rfields) >= 3 and rfields[0] == fstype
                                       and (option is None or option in rfields[2].split(","))):
            continue
        found.append(Path(fields[4].replace("\\040", " ")))
    return found


def _own_cgroup(controller: str | None) -> str:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if (controller is None and ctrls == "") or (controller is not None and controller in ctrls.split(",")):
                return path.lstrip("/")
    except (OSError, ValueError):
        pass
    return ""


_CGROUP_LIMIT_FILES = {("pids", 1): ("pids.max", "8"), ("pids", 2): ("pids.max", "8"),
                       ("memory", 1): ("memory.limit_in_bytes", "-1"), ("memory", 2): ("memory.max", "max"),
                       ("cpu", 1): ("cpu.shares", "1024"), ("cpu", 2): ("cpu.weight", "100")}
"""Per controller and cgroup version: the limit file and a harmless value written by the probe."""


@functools.cache
def _cgroup_parent(controller: str) -> tuple[Path, int] | None:
    """A cgroup directory (and its cgroup version) under which we may create children that limit
    ``controller`` (``pids``, ``memory`` or ``cpu``); probed once."""
    candidates = [(m / _own_cgroup(controller), 1) for m in _mount_points("cgroup", controller)]
    candidates += [(m / _own_cgroup(None), 2) for m in _mount_points("cgroup2")]
    for parent, version in candidates:
        limit_file, value = _CGROUP_LIMIT_FILES[(controller, version)]
        probe = parent / f"cuda_gym-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            (probe / limit_file).write_text(f"{value}\n")
            return parent, version
        except OSError:
            continue
        finally:
            try:
                probe.rmdir()
            except OSError:
                pass
    return None


def cpu_weight(nice: int, version: int) -> int:
    """The ``cpu`` cgroup weight of a niceness: the kernel's weight of ``nice`` (1024 / 1.25^nice) on
    cgroup v1's ``cpu.shares`` scale (default 1024, at least 2), or on v2's ``cpu.weight`` (default 100,
    at least 1)."""
    if version == 1:
        return max(2, round(1024 / 1.25 ** nice))
    return max(1, min(10_000, round(100 / 1.25 ** nice)))


def cpu_weight_applies() -> bool:
    """Whether sandboxes with a niceness get a ``cpu`` cgroup of its weight here (a writable ``cpu``
    cgroup can be made)."""
    return _cgroup_parent("cpu") is not None


@functools.cache
def _warn_nice_unenforced() -> None:
    logger.warning("no writable cpu cgroup here: a sandbox's niceness is given to its session's scheduling group "
                   "(/proc/self/autogroup) instead, which a command that starts a session of its own escapes (and "
                   "which bwrap mode sets at most once a second), so builds and agent commands may compete with the "
                   "judge's timed servers. Give the container a writable cpu cgroup (see docs/sandbox.md).")


def _pids_cgroup_parent() -> Path | None:
    """The parent of per-sandbox pids cgroups, or ``None`` where none can be made here."""
    found = _cgroup_parent("pids")
    return found[0] if found else None


@functools.cache
def _warn_nproc_unenforced() -> None:
    logger.warning("running as root without a writable pids cgroup: the kernel does not enforce the process "
                   "limit (uid 0 is exempt from RLIMIT_NPROC). In bwrap and unshare mode the sandbox counts its "
                   "tasks every half second and stops the command past the limit (a fork bomb may overshoot "
                   "between two counts); in limits mode only the wall limit stops one. Give the container a "
                   "writable cgroup or run as a non-root user (see docs/sandbox.md).")


def _why_uid_shared() -> str:
    rng = configured_range()
    if rng is None:
        return f"{UIDS_ENV}=off"
    if os.geteuid() != 0:
        return "this process is not root"
    if shutil.which("setpriv") is None:
        return "setpriv is missing"
    if missing := missing_capabilities():
        return f"this process lacks {', '.join(missing)}"
    if not range_mapped(rng):
        return f"its user namespace does not map the uids {rng.first}-{rng.last}"
    return "bwrap runs here only in a user namespace, as this uid"


@functools.cache
def warn_shared_uid() -> None:
    """Warn once where sandboxes run as this process's uid (:mod:`cuda_gym.sandbox_uids` cannot give them
    their own): they share its per-user kernel state. A sandbox that parked thousands of descriptors in flight
    made the kernel refuse the judge's descriptor sends (input arenas, GPU segments) unless the judge has
    ``CAP_SYS_RESOURCE`` or ``CAP_SYS_ADMIN`` (red team 8, I1 and its recheck's V1), and one that fills the
    user's epoll watches makes every ``epoll_ctl`` of the user fail, capable or not (E1)."""
    mode = sandbox_mode()
    if mode == "limits" or own_uid_available(mode):
        return
    why = _why_uid_shared()
    logger.warning("sandboxes run as this process's own uid (%s), so they share its per-user kernel state: one "
                   "that parks descriptors in flight or fills the user's epoll watches can make the judge's "
                   "descriptor sends and event waits fail for as long as it lives (JudgeError for other "
                   "evaluations). Run the judge as root with CAP_SETUID, CAP_SETGID, CAP_DAC_READ_SEARCH and "
                   "CAP_SYS_PTRACE so that each sandbox gets a uid of its own (see docs/sandbox.md).", why)


@functools.cache
def _warn_memory_per_process() -> None:
    logger.warning("no writable memory cgroup here: a sandbox's memory is summed every %.1f s (PSS of its processes) "
                   "and the command stopped past the limit, so it may overshoot between two checks (limits mode: "
                   "per process only). Give the container a writable cgroup (see docs/sandbox.md).", _MEMORY_CHECK_S)


class _Cgroups:
    """One sandbox's cgroups: one per hierarchy (cgroup v1 has one per controller, v2 one for all).

    They cap the number of tasks (``pids``) and the memory of all processes together (``memory``),
    weigh the CPU time of a sandbox with a niceness (``cpu``: see ``Limits.nice``), and let the sandbox
    kill every member at the end, also those that left its process group.
    """

    def __init__(self, max_pids: int | None, memory_bytes: int | None, nice: int = 0):
        self.dirs: dict[str, tuple[Path, int]] = {}
        name = f"cuda_gym-{_owner_tag()}-{uuid.uuid4().hex[:12]}"
        try:
            for controller, value in (("pids", max_pids), ("memory", memory_bytes), ("cpu", nice or None)):
                found = _cgroup_parent(controller) if value is not None else None
                if found is None:
                    continue
                parent, version = found
                path = parent / name
                if not path.is_dir():
                    path.mkdir()
                if controller == "cpu":
                    value = cpu_weight(nice, version)
                (path / _CGROUP_LIMIT_FILES[(controller, version)][0]).write_text(f"{value}\n")
                if controller == "memory" and version == 2:
                    _try_write(path / "memory.swap.max", "0")
                elif controller == "memory":
                    _try_write(path / "memory.memsw.limit_in_bytes", str(value))
                self.dirs[controller] = (path, version)
        except OSError:
            self.remove()
            raise

    def __bool__(self) -> bool:
        return bool(self.dirs)

    def has(self, controller: str) -> bool:
        """True when the sandbox has a cgroup limiting ``controller``."""
        return controller in self.dirs

    @property
    def procs_files(self) -> list[Path]:
        """The ``cgroup.procs`` file of each of its cgroups (a process joins by writing its PID to each)."""
        return sorted({path / "cgroup.procs" for path, _ in self.dirs.values()})

    def limit_hit(self, controller: str) -> bool:
        """True when the kernel refused a fork (``pids``) or OOM-killed a member (``memory``)."""
        if controller not in self.dirs:
            return False
        path, version = self.dirs[controller]
        name, pattern = {"pids": ("pids.events", r"^max (\d+)"),
                         "memory": ("memory.events" if version == 2 else "memory.oom_control", r"^oom_kill (\d+)")}[
            controller]
        try:
            m = re.search(pattern, (path / name).read_text(), re.M)
        except OSError:
            return False
        return bool(m and int(m.group(1)) > 0)

    def members(self) -> list[int]:
        """The PIDs in its cgroups (none without one, or once the cgroup is gone)."""
        pids: set[int] = set()
        for path in self.procs_files:
            try:
                pids.update(int(p) for p in path.read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(pids)

    def kill_all(self) -> None:
        """SIGKILL every member, until none is left (5 s at most)."""
        if not self.dirs:
            return
        path = next(iter(self.dirs.values()))[0]
        _try_write(path / "cgroup.kill", "1")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        logger.warning("processes of %s survived SIGKILL for 5 s", path)

    def remove(self) -> None:
        """Remove its (empty) cgroups."""
        for path in {p for p, _ in self.dirs.values()}:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                logger.warning("could not remove cgroup %s", path)


_TMP_PREFIX = "cuda_gym_sbx_"
"""Host temp dirs of sandboxes are ``<tmp>/cuda_gym_sbx_<owner tag>_<random>``."""


def _owner_tag() -> str:
    """``<PID namespace inode>-<pid>`` of this process: names its sandboxes' cgroups and temp dirs, so
    that a later process of the same PID namespace can tell a dead owner's leftovers."""
    return f"{os.stat('/proc/self/ns/pid').st_ino}-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def _sweep_stale() -> None:
    """Once per process: remove the cgroups and temp dirs of sandboxes whose creator died without
    cleaning up (SIGKILL, OOM), killing anything still in those cgroups."""
    ns = os.stat("/proc/self/ns/pid").st_ino
    parents = {found[0] for found in map(_cgroup_parent, ("pids", "memory", "cpu")) if found is not None}
    for parent in parents:
        try:
            children = list(parent.iterdir())
        except OSError:
            continue
        for child in children:
            m = re.fullmatch(rf"cuda_gym-{ns}-(\d+)-[0-9a-f]+", child.name)
            if m is None or _pid_alive(int(m.group(1))) or not child.is_dir():
                continue
            stale = _Cgroups.__new__(_Cgroups)
            stale.dirs = {"stale": (child, 2 if (child / "cgroup.kill").exists() else 1)}
            stale.kill_all()
            stale.remove()
            logger.info("removed the stale sandbox cgroup %s", child)
    try:
        entries = list(Path(tempfile.gettempdir()).glob(f"{_TMP_PREFIX}{ns}-*_*"))
    except OSError:
        entries = []
    for entry in entries:
        m = re.fullmatch(re.escape(_TMP_PREFIX) + rf"{ns}-(\d+)_.*", entry.name)
        if m is not None and not _pid_alive(int(m.group(1))):
            remove_tree(entry)


def _try_write(path: Path, value: str) -> None:
    try:
        if path.exists():
            path.write_text(f"{value}\n")
    except OSError:
        pass


# --------------------------------------------------------------------------- host paths


@functools.cache
def _cuda_home() -> Path | None:
    """The CUDA toolkit the build uses (:func:`cuda_gym.host.find_cuda_home`), so both agree."""
    return find_cuda_home()


@functools.cache
def _runtime_paths() -> tuple[Path, ...]:
    """Host paths a sandboxed Python, compiler or CUDA program needs to read."""
    import importlib.util
    import site

    paths: list[Path] = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                         Path(sys.executable).parent]
    paths += [Path(p) for p in site.getsitepackages()]
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        paths.append(Path(site.getusersitepackages()))
    packages: list[Path] = []
    for name in ("cuda_gym", "cuda_gym.envs", "cuda_gym.wrappers", "cuda_gym.baselines"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            packages += [Path(os.path.realpath(p)) for p in spec.submodule_search_locations]
    paths += packages
    cuda = _cuda_home()
    if cuda is not None:
        paths += [cuda, cuda.resolve()]
    paths += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p and _holds_shared_library(p)]
    # Only install folders (pip --target, a venv's site-packages); never the checkout that holds cuda_gym
    # itself (its package folders are bound above) nor a project folder a trainer put on the path: binding
    # those would show the repository (.git) or the project's secrets (.env, checkpoints) to agent code.
    paths += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(":")
              if p and _holds_installed_packages(p)
              and not any(pkg.is_relative_to(os.path.realpath(p)) for pkg in packages)]
    return _dedup_roots(p for p in paths if p.is_absolute() and p.exists())


def _holds_installed_packages(folder: str) -> bool:
    """Whether ``folder`` is an install target: it directly holds a ``*.dist-info`` folder, as pip writes
    for every package it installs (``pip install --target``, site-packages). A source checkout, even one
    installed editable, holds at most a ``*.egg-info`` and does not count."""
    try:
        with os.scandir(folder) as it:
            return any(e.name.endswith(".dist-info") and e.is_dir(follow_symlinks=False) for e in it)
    except OSError:
        return False


def _holds_shared_library(folder: str) -> bool:
    """Whether ``folder`` directly holds a shared library (``*.so`` or ``*.so.<version>``): what the
    dynamic loader looks for in an ``LD_LIBRARY_PATH`` folder."""
    try:
        with os.scandir(folder) as it:
            return any(_SHARED_LIBRARY.search(e.name) and not e.is_dir() for e in it)
    except OSError:
        return False


_SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")


def _dedup_roots(paths) -> tuple[Path, ...]:
    """Resolved, deduplicated paths, dropping those under another one and under /usr (bound anyway)."""
    out: list[Path] = []
    for p in sorted({Path(os.path.realpath(p)) for p in paths}, key=lambda q: (len(q.parts), str(q))):
        if p == Path("/") or any(p.is_relative_to(q) for q in [*out, Path("/usr")]):
            continue
        out.append(p)
    return tuple(out)


def _signal_of(returncode: int) -> int | None:
    if returncode < 0:
        return -returncode
    if 128 < returncode < 128 + 65:
        return returncode - 128
    return None


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"


class _OutputBuffer:
    """Keeps the first and last halves of ``cap`` bytes of a stream."""

    def __init__(self, cap: int):
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            extra = len(self.tail) - self.half
            if extra > 0:
                del self.tail[:extra]
                self.dropped += extra

    def text(self) -> str:
        mid = f"\n... [{self.dropped} bytes of output dropped] ...\n".encode() if self.dropped else b""
        return bytes(self.head + mid + self.tail).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------- the sandbox


_NICE = shutil.which("nice") or ""
"""coreutils' ``nice`` (``Limits.nice``); without it the sandbox runs at the caller's niceness."""


class Sandbox:
    """Runs commands with a read-only system, chosen writable paths, no network and resource limits.

    Args:
        writable: host paths the command may write (bound at the same path inside).
        readonly: host paths made read-only, also inside ``writable`` ones (protected workspace files).
        gpu: expose the NVIDIA devices (and use RLIMIT_DATA rather than RLIMIT_AS for memory).
        network: keep the host's network (off by default: no route out, no host loopback).
        extra_env: variables added to every command's environment.
        mode: force ``bwrap``/``unshare``/``limits``; default :func:`sandbox_mode`.
        own_uid: run each command as a host uid of its own where this process can (:mod:`cuda_gym.sandbox_uids`);
            ``False`` only for trusted code in writable trees that sandboxes running at once share.

    Paths keep their host names inside, so tools report the same paths. The Python installation,
    site-packages, the ``cuda_gym`` package and ``CUDA_HOME`` are readable wherever they live; the
    rest of the home directory is not (bwrap mode).
    """

    def __init__(self, writable: Sequence[Path | str], readonly: Sequence[Path | str] = (), gpu: bool = False,
                 network: bool = False, extra_env: Mapping[str, str] | None = None, mode: SandboxMode | None = None,
                 own_uid: bool = True):
        self.writable = [Path(p).absolute() for p in writable]
        self.readonly = [Path(p).absolute() for p in readonly]
        for p in self.writable:
            if not p.exists():
                raise SandboxError(f"writable path {p} does not exist: create it before making the sandbox")
        self.gpu = gpu
        self.network = network
        self.extra_env = dict(extra_env or {})
        if mode is not None and mode not in MODES:
            raise SandboxError(f"unknown sandbox mode {mode!r}: use one of {', '.join(MODES)}")
        self.mode: SandboxMode = mode or sandbox_mode()
        self.own_uid = own_uid and own_uid_available(self.mode)
        """Whether each command runs as a host uid of its own (:mod:`cuda_gym.sandbox_uids`)."""
        self._prlimit = shutil.which("prlimit")

    def __repr__(self) -> str:
        return (f"Sandbox(mode={self.mode!r}, writable={[str(p) for p in self.writable]}, "
                f"readonly={[str(p) for p in self.readonly]}, gpu={self.gpu}, network={self.network})")

    # -- command construction

    def mount_plan(self, limits: Limits | None = None, uid: int | None = None) -> list[tuple]:
        """The filesystem a command sees, as ordered steps; bwrap and unshare mode both carry them out.
        ``uid``: the sandbox's own uid, named in its ``/etc/passwd`` and ``/etc/group``.

        Steps: ``("ro", src, dst)`` read-only bind (every submount too), ``("ro-try", src, dst)`` the
        same when ``src`` exists, ``("rw", src, dst)``, ``("dev-bind", src, dst)``, ``("symlink",
        target, path)``, ``("tmpfs", path, size_bytes, mode)``, ``("proc", path)`` a fresh ``/proc``,
        ``("proc-ro", path)`` a part of it made read-only, ``("dev", nodes)`` a minimal ``/dev``,
        ``("remount-ro", path)``. Everything not named stays out of the sandbox.
        """
        size = (limits or Limits()).tmpfs_bytes
        plan: list[tuple] = [("ro", "/usr", "/usr")]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            p = Path("/") / name
            if p.is_symlink():
                plan.append(("symlink", os.readlink(p), str(p)))
            elif p.is_dir():
                plan.append(("ro", str(p), str(p)))
        # An empty /tmp first: binds below it (the package itself when it lives under /tmp, as in a
        # CI clone there) must land on top of it, not be hidden by it.
        plan.append(("tmpfs", "/tmp", size, "1777"))
        named = identity_files(uid) if uid is not None else {}
        plan += [("ro", str(named.get(p.name, p)), str(p)) for p in (Path("/etc") / name for name in ETC_FILES)
                 if p.exists()]
        plan += [("ro", extra, extra) for extra in ("/opt", "/sys/devices/system/cpu") if Path(extra).is_dir()]
        plan += [("ro", str(p), str(p)) for p in _runtime_paths()]
        plan += [("proc", "/proc"), ("dev", list(DEV_NODES)), ("tmpfs", "/dev/shm", size, "1777")]
        plan += [("proc-ro", f"/proc/{name}") for name in PROC_READONLY if Path("/proc", name).exists()]
        if self.gpu:
            if Path("/sys").is_dir():
                plan.append(("ro", "/sys", "/sys"))
            plan += [("dev-bind", f"/dev/{name}", f"/dev/{name}") for name in self._gpu_devices()]
        plan.append(("tmpfs", "/run", size, "1777"))
        plan += [("rw", str(p), str(p)) for p in self.writable]
        # A link in a readonly path (inside a writable workspace, the agent may make one) is not bound:
        # the bind would follow it and show its host target inside.
        plan += [("ro-try", str(p), str(p)) for p in self.readonly if not p.is_symlink()]
        plan += [("remount-ro", "/dev"), ("remount-ro", "/")]
        return plan

    def _bwrap_args(self, limits: Limits, uid: int | None) -> list[str]:
        exe = shutil.which("bwrap") or "bwrap"
        args = [exe, *_bwrap_isolation_args(self.network, self.own_uid)]
        flags = {"ro": "--ro-bind", "ro-try": "--ro-bind-try", "rw": "--bind", "dev-bind": "--dev-bind",
                 "symlink": "--symlink"}
        made: set[str] = set()
        for kind, *rest in self.mount_plan(limits, uid):
            if kind in flags:
                args += [*_bwrap_parent_dirs(rest[-1], made, kind != "symlink"), flags[kind], *rest]
            elif kind == "tmpfs":
                args += [*_bwrap_parent_dirs(rest[0], made, False), *(["--size", str(rest[1])] if rest[1] else []),
                         "--perms", rest[2], "--tmpfs", rest[0]]
            elif kind == "proc":
                args += [*_bwrap_parent_dirs(rest[0], made, True), "--proc", rest[0]]
            elif kind == "proc-ro":  # bwrap binds the host's /proc part read-only over the fresh one
                args += ["--ro-bind", rest[0], rest[0]]
            elif kind == "dev":
                args += [*_bwrap_parent_dirs("/dev", made, True), "--dev", "/dev"]
            elif kind == "remount-ro":
                args += ["--remount-ro", rest[0]]
        return args

    @staticmethod
    def _gpu_devices() -> list[str]:
        """Names under /dev of the NVIDIA (and DRI) device nodes on this host."""
        names = [p.name for p in sorted(Path("/dev").glob("nvidia*"))]
        return names + (["dri"] if Path("/dev/dri").exists() else [])

    def _gpu_groups(self) -> list[int]:
        """The groups of the GPU device nodes that others may not open (a sandbox uid needs them)."""
        if not self.gpu:
            return []
        nodes = [Path("/dev", name) for name in self._gpu_devices()]
        nodes += [p for p in Path("/dev/dri").glob("*") if Path("/dev/dri").is_dir()]
        stats = [p.stat() for p in nodes if p.exists()]
        return sorted({st.st_gid for st in stats if st.st_mode & 0o006 != 0o006})

    def _unshare_args(self, root: Path, cwd: Path, limits: Limits, uid: int | None) -> list[str]:
        """``unshare`` with fresh namespaces, running :mod:`cuda_gym._sandbox_init` on the mount plan."""
        steps = [list(step) for step in self.mount_plan(limits, uid)]
        plan = {"root": str(root), "cwd": str(cwd), "steps": steps, "loopback": not self.network}
        args = ["unshare", "--mount", "--pid", "--fork", "--kill-child=SIGKILL", "--ipc", "--uts", "--cgroup"]
        if not self.network:
            args.append("--net")
        identity = identity_args(uid, self._gpu_groups()) if uid is not None else []
        return [*args, "--", sys.executable, "-I", "-S", str(_INIT), json.dumps(plan), "--",
                _SETPRIV, *identity, *_SETPRIV_DROP]

    def _rlimit_values(self, limits: Limits, nproc: bool) -> dict[str, int | tuple[int, int]]:
        vals: dict[str, int | tuple[int, int]] = {"core": 0}
        # SIGXCPU at the soft limit names the cause; SIGKILL a second later if it is ignored.
        if math.isfinite(limits.effective_cpu_s()):
            cpu = max(1, math.ceil(limits.effective_cpu_s()))
            vals["cpu"] = (cpu, cpu + 1)
        if limits.memory_bytes is not None:
            vals["data" if self.gpu else "as"] = int(limits.memory_bytes)
        if limits.file_bytes is not None:
            vals["fsize"] = int(limits.file_bytes)
        if limits.open_files is not None:
            vals["nofile"] = int(limits.open_files)
        if nproc and limits.processes is not None:
            vals["nproc"] = int(limits.processes)
        return vals

    def env_for(self, cwd: Path, tmp: Path, env: Mapping[str, str] | None) -> dict[str, str]:
        """The environment a command sees: a minimal base, pass-through variables, ``extra_env``, ``env``."""
        path = [str(Path(sys.executable).parent)]
        cuda = _cuda_home()
        if cuda is not None:
            path.append(str(cuda / "bin"))
        path += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        out = {"PATH": ":".join(dict.fromkeys(path)), "HOME": str(tmp), "TMPDIR": str(tmp), "LANG": "C",
               "LC_ALL": "C", "PYTHONDONTWRITEBYTECODE": "1", "PWD": str(cwd)}
        if cuda is not None:
            out["CUDA_HOME"] = str(cuda)
        for var in PASSTHROUGH_ENV:
            if var in os.environ:
                out[var] = os.environ[var]
        out.update(self.extra_env)
        out.update(env or {})
        return out

    # -- running

    def start(self, command: str | Sequence[str], *, cwd: Path | str, limits: Limits | None = None,
              env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = (),
              stdin: str | None = None) -> SandboxProcess:
        """Start ``command`` in the sandbox and return at once; the caller talks to it over ``pass_fds``.

        Same isolation and limits as :meth:`run`. ``pass_fds`` are open descriptors of this process
        (one end of a ``socket.socketpair()``, pipe ends) that the command inherits under the same
        numbers, in every mode; 0-2 are the sandbox's own (stdin is ``/dev/null`` unless ``stdin``
        is given, stdout and stderr go to the capped output buffer). The wall limit is enforced by a
        watchdog thread; ``Limits(wall_s=math.inf)`` turns it off for a long-lived server, which the
        caller then ends with :meth:`SandboxProcess.kill` (or by leaving its ``with`` block). The
        sandbox dies with this process, also when it is SIGKILLed.

        Raises :class:`SandboxError` when the sandbox cannot start (missing ``cwd``, a closed or
        reserved descriptor in ``pass_fds``, broken bwrap).
        """
        limits = limits or Limits()
        cwd = Path(cwd).absolute()
        if not cwd.is_dir():
            raise SandboxError(f"working directory {cwd} does not exist: create it or pass another cwd")
        if self.mode != "limits" and not any(cwd.is_relative_to(p) for p in [*self.writable, *self.readonly]):
            raise SandboxError(f"working directory {cwd} is not visible in the sandbox: pass it (or a parent) "
                               "in writable or readonly")
        inner = ["/bin/bash", "-c", command] if isinstance(command, str) else [str(c) for c in command]
        if not inner:
            raise SandboxError("empty command: pass a string or a non-empty argument list")
        fds = _check_fds(pass_fds)

        _sweep_stale()
        cgroups = _Cgroups(limits.processes, limits.memory_bytes, max(limits.nice, 0))
        if limits.processes is not None and not cgroups.has("pids") and os.geteuid() == 0 and not self.own_uid:
            _warn_nproc_unenforced()
        if limits.nice > 0 and not cgroups.has("cpu"):
            _warn_nice_unenforced()
        if limits.memory_bytes is not None and not cgroups.has("memory"):
            _warn_memory_per_process()
        host_tmp = None if self.mode == "bwrap" else Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{_owner_tag()}_"))
        lease: UidLease | None = None
        claim: TreeClaim | None = None
        try:
            if self.own_uid:
                lease = lease_uid(self.writable)
                hand_over(self.writable, lease.uid)
            elif self.mode != "limits" and separation_available():
                # Trees an earlier sandbox of its own uid wrote are this uid's again: root without capabilities
                # cannot write into them (the compile servers' inductor cache after an upgrade, red team 9 recheck).
                # Claimed first: never taken from a live sandbox of its own uid.
                claim = claim_trees(self.writable, os.getuid())
                hand_over(self.writable, os.getuid())
            # bwrap as the caller's uid: its own init (PID 1 of the sandbox) is of that uid too, and a command
            # could ptrace it and make the syscalls the prelude's filter refuses (red team 9's second recheck:
            # a key in the caller's keyring). bwrap installs the filter on its init as well.
            filter_fd = _filter_pipe() if self.mode == "bwrap" and not self.own_uid else None
            try:
                argv, run_env, preexec = self._command(inner, cwd, host_tmp, env, limits, cgroups,
                                                       lease.uid if lease else None, filter_fd)
                started = time.monotonic()
                proc = spawn(argv, cwd=cwd, env=run_env, stdin=subprocess.PIPE if stdin is not None
                              else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True, close_fds=True,
                              pass_fds=(*fds, *([filter_fd] if filter_fd is not None else [])), preexec_fn=preexec)
            except OSError as exc:
                raise SandboxError(f"could not start {self.mode}: {exc}; check the install or set "
                                   f"{MODE_ENV}=limits") from exc
            finally:
                if filter_fd is not None:
                    os.close(filter_fd)
        except BaseException:
            _cleanup(cgroups, host_tmp, lease, claim)
            raise
        return SandboxProcess(proc, mode=self.mode, limits=limits, started=started, cgroup=cgroups,
                              host_tmp=host_tmp, stdin=stdin, disk_paths=self.writable, uid_lease=lease,
                              tree_claim=claim)

    def run(self, command: str | Sequence[str], *, cwd: Path | str, limits: Limits | None = None,
            env: Mapping[str, str] | None = None, stdin: str | None = None) -> RunResult:
        """Run ``command`` (a ``str`` goes through ``/bin/bash -c``) in ``cwd`` and wait for it.

        :meth:`start` and :meth:`SandboxProcess.wait`. Never raises for what the command does;
        raises :class:`SandboxError` when the sandbox itself cannot start (missing ``cwd``, broken bwrap).
        """
        with self.start(command, cwd=cwd, limits=limits, env=env, stdin=stdin) as proc:
            proc.wait()
        return proc.result()

    def _command(self, inner: list[str], cwd: Path, host_tmp: Path | None, env: Mapping[str, str] | None,
                 limits: Limits, cgroups: _Cgroups, uid: int | None, filter_fd: int | None = None):
        """The host argv, its environment and the pre-exec hook (rlimits where ``prlimit`` is missing);
        ``uid``: the sandbox's own uid (:attr:`own_uid`); ``filter_fd``: bwrap's ``--add-seccomp-fd``."""
        # Isolating modes have their own private /tmp; limits mode gets a fresh host temp dir.
        run_env = self.env_for(cwd, Path("/tmp") if self.mode != "limits" else host_tmp, env)  # type: ignore[arg-type]
        # RLIMIT_NPROC counts every process of the user: for root (capabilities dropped) that is every
        # root process of the host, so a busy host would refuse the sandbox's first fork. A uid of its own
        # counts the sandbox's alone; root without one relies on the pids cgroup or the supervisor's count.
        rl = self._rlimit_values(limits, nproc=not cgroups.has("pids") and (os.geteuid() != 0 or uid is not None))
        preexec = None
        if self._prlimit:
            limit_argv = [self._prlimit, *(f"--{k}={_soft_hard(v)}" for k, v in rl.items()), "--"]
        else:
            limit_argv = []
            preexec = functools.partial(_apply_rlimits, rl)
        # Without a cpu cgroup, the niceness also goes to the session's scheduling group (autogroup): the
        # sandbox is a session of its own (bwrap's payload a second one inside), where a niceness alone
        # counts only against the session's own processes.
        group_nice = [] if limits.nice <= 0 or cgroups.has("cpu") else [
            "/bin/sh", "-c", f'{{ echo {int(limits.nice)} > /proc/self/autogroup; }} 2>/dev/null; exec "$@"', "sandbox-nice"]
        program = sandbox_filter(platform.machine()) or b""
        keyrings = [sys.executable, "-I", "-S", "-c", _PRELUDE, "0" if uid is None else "1", program.hex()]
        if self.mode == "bwrap":
            identity = [] if uid is None else [_SETPRIV, *identity_args(uid, self._gpu_groups()), *_SETPRIV_DROP]
            seccomp = [] if filter_fd is None else ["--add-seccomp-fd", str(filter_fd)]
            argv = [*self._bwrap_args(limits, uid), *seccomp, "--chdir", str(cwd), "--", *group_nice, *identity,
                    *keyrings, *limit_argv, *inner]
        elif self.mode == "unshare":
            assert host_tmp is not None
            argv = [*self._unshare_args(host_tmp, cwd, limits, uid), *keyrings, *limit_argv, *inner]
        else:
            argv = [*limit_argv, *inner]
        if self.mode != "bwrap":
            # SIGKILL when this process dies (bwrap has --die-with-parent; unshare's --kill-child then
            # takes the namespace down with it). Spawned from one long-lived thread: see spawn.
            argv = killed_with_this_process(argv)
        if limits.nice and _NICE:
            argv = [_NICE, "-n", str(limits.nice), *argv]
        if self.mode != "bwrap":
            argv = [*group_nice, *argv]
        # The kernel's out-of-memory killer takes the sandbox first, whatever it holds: memory in written but
        # unmapped memfds (or tmpfs files) counts in no process's size, so the largest trusted process, the
        # judge's reference worker, was killed instead, twice per evaluation (red team 7, O1). Raising one's
        # own score needs no privilege; every process the sandbox starts inherits it (where /proc refuses the
        # write, the sandbox runs without it rather than not at all).
        argv = ["/bin/sh", "-c", f'{{ echo {OOM_SCORE_ADJ} > /proc/self/oom_score_adj; }} 2>/dev/null; exec "$@"',
                "sandbox-oom", *argv]
        files = cgroups.procs_files
        if files:
            join = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n-1)); done'
            argv = ["/bin/sh", "-c", join + '; exec "$@"', "sandbox-cgroup", str(len(files)),
                    *map(str, files), *argv]
        return argv, run_env, preexec


class SandboxProcess:
    """A sandboxed command running in the background, made by :meth:`Sandbox.start`.

    A supervisor thread drains stdout and stderr into the capped output buffer, enforces the wall
    limit (kill of the whole sandbox, ``timed_out=True``), kills whatever the command left behind
    when its main process ends, and then frees the sandbox (cgroup, private temp dir).

    Attributes:
        pid: host PID of the sandbox's outermost process (the leader of its process group).
        mode: the sandbox mode it runs under.
        limits: the limits it runs under.

    Use it as a context manager: leaving the ``with`` block kills the sandbox and waits for it.
    """

    def __init__(self, proc: subprocess.Popen[bytes], *, mode: SandboxMode, limits: Limits, started: float,
                 cgroup: _Cgroups, host_tmp: Path | None, stdin: str | None = None,
                 disk_paths: Sequence[Path] = (), uid_lease: UidLease | None = None,
                 tree_claim: TreeClaim | None = None):
        self.pid = proc.pid
        self.uid = uid_lease.uid if uid_lease else None
        """The host uid the command runs as when it has one of its own, else ``None`` (this process's)."""
        self._uid_lease = uid_lease
        self._tree_claim = tree_claim
        self.mode: SandboxMode = mode
        self.limits = limits
        self._proc = proc
        self._started = started
        self._ended: float | None = None
        self._cgroup = cgroup
        self._host_tmp = host_tmp
        self._disk_paths = tuple(disk_paths)
        self._buf = _OutputBuffer(limits.output_bytes)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._timed_out = False
        self._disk_stopped = False
        self._entries_stopped = False
        self._unwalkable = ""
        watch_tree = limits.disk_bytes is not None or limits.entries is not None
        self._next_disk_check = started + _DISK_CHECK_S if watch_tree else math.inf
        self._memory_stopped = False
        self._processes_stopped = False
        # Where no memory or pids cgroup could be made, the sandbox's PID namespace is watched instead.
        watch = mode != "limits" and ((limits.memory_bytes is not None and not cgroup.has("memory"))
                                      or (limits.processes is not None and not cgroup.has("pids")))
        self._next_memory_check = started + _MEMORY_CHECK_S if watch else math.inf
        self._pid_ns: str | None = None
        self._result: RunResult | None = None
        self._error: SandboxError | None = None
        if stdin is not None:
            threading.Thread(target=_feed, args=(proc.stdin, stdin.encode()), daemon=True).start()
        self._thread = threading.Thread(target=self._supervise, name=f"sandbox-{proc.pid}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        state = "running" if self.poll() is None else f"returncode={self.poll()}"
        return f"SandboxProcess(pid={self.pid}, mode={self.mode!r}, {state})"

    def __enter__(self) -> SandboxProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self.wait()

    @property
    def seconds(self) -> float:
        """Wall-clock seconds from the start to the end of the process tree (or to now, while it runs)."""
        return (self._ended if self._ended is not None else time.monotonic()) - self._started

    def poll(self) -> int | None:
        """The exit status once the sandbox has ended and been cleaned up, else ``None``."""
        return self._proc.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        """Wait until the sandbox has ended (at the latest at its wall limit) and return the exit status.

        Raises :class:`subprocess.TimeoutExpired` when it still runs after ``timeout`` seconds.
        """
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self._proc.args, timeout or 0.0)
        return self._proc.returncode

    def kill(self) -> None:
        """SIGKILL the whole sandbox: its process group, its PID namespace and its cgroup. Returns at once."""
        if not self._done.is_set():
            self._kill_tree()

    def pause(self, timeout_s: float) -> list[int]:
        """Stop every process of the sandbox (``SIGSTOP``: its process tree, its PID namespace's orphans,
        its cgroups' members) and return once all their threads are seen stopped; the processes stopped,
        for :meth:`resume`. Raises :class:`~cuda_gym.process_stop.StopTimeout` after ``timeout_s``."""
        return stop_tree(self.pid, timeout_s, self._cgroup.members if self._cgroup else None)

    def resume(self, paused: list[int]) -> None:
        """Let the processes that :meth:`pause` stopped go on (``SIGCONT``)."""
        continue_tree(paused)

    def output(self) -> str:
        """Stdout and stderr so far (UTF-8 with replacement, middle dropped past the output cap)."""
        with self._lock:
            return self._buf.text()

    def result(self) -> RunResult:
        """What the command did, once it has ended (see :meth:`wait`).

        Raises :class:`SandboxError` while it still runs, or when the sandbox's own setup failed.
        """
        if not self._done.is_set():
            raise SandboxError(f"sandbox process {self.pid} is still running: wait() or kill() it first")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    # -- supervisor thread

    def _kill_tree(self) -> None:
        _killpg(self.pid)
        self._cgroup.kill_all()

    def _supervise(self) -> None:
        try:
            self._pump()
        finally:
            self._finish()

    def _pump(self) -> None:
        """Read output until the tree is gone; kill it at the wall limit, at the disk limit, or when its
        main process ends."""
        proc = self._proc
        assert proc.stdout is not None
        deadline = self._started + self.limits.wall_s
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        reading = True
        # poll(2), not epoll: a sandbox runs as this process's user, and can use up that user's epoll watches,
        # which no capability exempts (red team 8, E1); poll has no such quota.
        with selectors.PollSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            drain_until: float | None = None
            while True:
                now = time.monotonic()
                if drain_until is None:
                    if proc.poll() is not None:
                        # The main process is done: nothing it started may outlive it.
                        self._kill_tree()
                        drain_until = now + 0.5
                    elif now >= deadline or self._disk_over(now) or self._memory_over(now):
                        self._timed_out = not (self._disk_stopped or self._entries_stopped or self._memory_stopped
                                               or self._processes_stopped)
                        self._kill_tree()
                        drain_until = now + _KILL_GRACE_S
                left = (drain_until if drain_until is not None else deadline) - now
                if drain_until is not None and (left <= 0 or not reading):
                    return
                if not reading:
                    # stdout closed but the process lives on: wait for it (deadline and disk checks go on).
                    try:
                        proc.wait(timeout=max(0.0, min(left, self._next_disk_check - now,
                                                       self._next_memory_check - now, 1.0)))
                    except subprocess.TimeoutExpired:
                        pass
                    continue
                if not sel.select(timeout=min(max(left, 0), 0.1)):
                    continue
                try:
                    data = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:
                    reading = False
                    sel.unregister(fd)
                    continue
                with self._lock:
                    self._buf.add(data)

    def _memory_over(self, now: float) -> bool:
        """Without a memory (pids) cgroup: are the proportional memory (PSS) (the tasks) of the sandbox's
        processes together over the limit? Checked every half second (less often when the scan is slow)."""
        if now < self._next_memory_check:
            return False
        if self._pid_ns is None:
            self._pid_ns = _child_pid_ns(self.pid)
        lim = self.limits
        max_tasks = lim.processes if not self._cgroup.has("pids") else None
        max_pss = lim.memory_bytes if not self._cgroup.has("memory") else None
        tasks, pss = _pid_ns_usage(self._pid_ns, max_tasks, max_pss) if self._pid_ns is not None else (0, 0)
        took = time.monotonic() - now
        self._next_memory_check = time.monotonic() + max(_MEMORY_CHECK_S, 10 * took)
        self._memory_stopped = max_pss is not None and pss > max_pss
        self._processes_stopped = max_tasks is not None and tasks > max_tasks
        return self._memory_stopped or self._processes_stopped

    def _disk_over(self, now: float) -> bool:
        """Every second or so (less often when the walk is slow): are the writable paths over the disk
        limit or the entries limit?"""
        if now < self._next_disk_check:
            return False
        usage = _tree_usage(self._disk_paths, self.limits.disk_bytes, self.limits.entries)
        took = time.monotonic() - now
        self._next_disk_check = time.monotonic() + max(_DISK_CHECK_S, 10 * took)
        self._disk_stopped, self._entries_stopped = usage.over(self.limits)
        self._unwalkable = self._unwalkable or usage.unwalkable
        return self._disk_stopped or self._entries_stopped

    def _finish(self) -> None:
        proc = self._proc
        try:
            assert proc.stdout is not None
            proc.stdout.close()
            if proc.poll() is None:
                self._kill_tree()
            try:
                returncode = proc.wait(timeout=_KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                returncode = proc.wait()
            self._cgroup.kill_all()  # members that left the process group (setsid)
            self._ended = time.monotonic()
            output = self.output()
            lim = self.limits
            usage = (_tree_usage(self._disk_paths, lim.disk_bytes, lim.entries)
                     if lim.disk_bytes is not None or lim.entries is not None else None)
            if self.mode == "unshare" and returncode == _SETUP_FAILED and "sandbox setup:" in output:
                self._error = SandboxError(f"unshare sandbox setup failed: {output.strip()[-400:]}; set "
                                           f"{MODE_ENV}=limits or install bubblewrap")
            else:
                sig = _signal_of(returncode)
                self._result = RunResult(
                    returncode=returncode, output=output, timed_out=self._timed_out,
                    reason=_reason(self.limits, returncode, sig, self._timed_out, output, self._cgroup, usage,
                                   _Stopped(self._disk_stopped, self._entries_stopped, self._memory_stopped,
                                            self._processes_stopped, self._unwalkable)),
                    seconds=self._ended - self._started, signal=sig, output_truncated=self._buf.dropped > 0,
                    mode=self.mode)
        except Exception as exc:  # pragma: no cover - a bug here must not leave waiters hanging
            logger.exception("sandbox supervisor of pid %d failed", self.pid)
            self._error = SandboxError(f"sandbox supervisor failed: {exc}; please report this")
        finally:
            _cleanup(self._cgroup, self._host_tmp, self._uid_lease, self._tree_claim)
            self._done.set()


def _filter_pipe() -> int | None:
    """The read end of a pipe holding :func:`~cuda_gym.seccomp_bpf.sandbox_filter`'s program (for bwrap's
    ``--add-seccomp-fd``), ``None`` on an architecture without one."""
    program = sandbox_filter(platform.machine())
    if not program:
        return None
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write)
    return read


def _check_fds(pass_fds: Sequence[int]) -> tuple[int, ...]:
    fds = tuple(sorted({int(fd) for fd in pass_fds}))
    for fd in fds:
        if fd < 3:
            raise SandboxError(f"pass_fds may not contain {fd}: descriptors 0-2 are the sandbox's stdin, stdout "
                               "and stderr; pass a descriptor >= 3 (os.dup it if needed)")
        try:
            os.fstat(fd)
        except OSError as exc:
            raise SandboxError(f"pass_fds: descriptor {fd} is not open ({exc.strerror}): pass an open one") from exc
    return fds


def _child_pid_ns(pid: int) -> str | None:
    """The PID namespace of the sandbox whose outermost host process is ``pid`` (bwrap or unshare): that of
    its first child living in a namespace other than ours; ``None`` while there is none yet."""
    own = os.readlink("/proc/self/ns/pid")
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    for child in children:
        try:
            ns = os.readlink(f"/proc/{child}/ns/pid")
        except OSError:
            continue
        if ns != own:
            return ns
    return None


def _pid_ns_usage(ns: str, max_tasks: int | None, max_pss: int | None) -> tuple[int, int]:
    """Number of tasks (threads) and, when ``max_pss`` is given, the memory in bytes of the processes in the PID
    namespace ``ns``: their proportional set size (shared pages split among their users) and the shared memory
    they hold that is in no process's size (:func:`_unmapped_shmem`). Stops counting as soon as one passes its
    bound (a fork bomb makes thousands of processes: the scan must stay short)."""
    pss = tasks = 0
    members: list[str] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") != ns:
                continue
            fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tasks += int(fields[17])  # num_threads, field 20
        if max_pss is not None:
            task = _live_task(entry.name, fields[0])
            members.append(task)
            try:
                m = re.search(r"^Pss:\s+(\d+) kB", Path(f"{task}/smaps_rollup").read_text(), re.M)
            except OSError:
                m = None
            if m:
                pss += int(m.group(1)) * 1024
        if (max_tasks is not None and tasks > max_tasks) or (max_pss is not None and pss > max_pss):
            return tasks, pss
    if max_pss is not None and members:
        pss += _unmapped_shmem(members)
    return tasks, pss


def _live_task(pid: str, state: str) -> str:
    """The ``/proc`` folder of a live thread of process ``pid`` (state ``state``): its main thread, unless that
    exited while others run on with the process's memory and descriptors (its ``smaps_rollup`` is empty then:
    six such processes held 1.2 GB under a 512 MiB limit, red team 10's recheck, R2)."""
    base = f"/proc/{pid}"
    if state not in ("Z", "X"):
        return base
    try:
        return next((f"{base}/task/{tid}" for tid in os.listdir(f"{base}/task") if tid != pid), base)
    except OSError:
        return base


_PRIVATE_TMPFS = ("tmp", "dev/shm", "run")
_SHMEM_SCAN_FDS = 1 << 16
_SHMEM_SCAN_MAPS_BYTES = 64 << 20
"""What one :func:`_unmapped_shmem` scan reads at most (descriptors, bytes of ``maps``): a sandbox past it is
counted as over its memory limit (a scan of whatever a command holds must not hold up its supervisor)."""
_UNCOUNTABLE = 1 << 62
"""The memory of a sandbox that holds more than one scan reads."""


def _unmapped_shmem(tasks: Sequence[str]) -> int:
    """Shared memory that the processes of one sandbox (``tasks``: a ``/proc`` folder of a live thread of each)
    hold outside every process's size: the files of its private tmpfs mounts (``/tmp``, ``/dev/shm``, ``/run``;
    pages also mapped count twice), and memfds held by a descriptor that no process of it maps. A sandbox held
    1 GiB in unmapped memfds under a 256 MiB limit, and the kernel's out-of-memory killer then took another
    evaluation's sandbox (red team 10, F2). Memfds held otherwise (in flight in a socket's queue, in an
    io_uring's table, in a thread's own descriptor table) escape this count: only a memory cgroup counts all."""
    total = 0
    for task in tasks:
        try:
            for folder in _PRIVATE_TMPFS:
                vfs = os.statvfs(f"{task}/root/{folder}")
                total += (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
            break
        except OSError:
            total = 0
    held: dict[int, int] = {}
    mapped: set[int] = set()
    fds_left, maps_left = _SHMEM_SCAN_FDS, _SHMEM_SCAN_MAPS_BYTES
    for task in tasks:
        try:
            with open(f"{task}/maps") as maps:
                for line in maps:
                    maps_left -= len(line)
                    if maps_left < 0:
                        return _UNCOUNTABLE
                    if "/memfd:" in line:
                        mapped.add(int(line.split()[4]))
            fds = os.listdir(f"{task}/fd")
        except (OSError, ValueError, IndexError):
            continue
        fds_left -= len(fds)
        if fds_left < 0:
            return _UNCOUNTABLE
        for fd in fds:
            link = f"{task}/fd/{fd}"
            try:
                if not os.readlink(link).startswith("/memfd:"):
                    continue
                st = os.stat(link)
            except OSError:
                continue
            held[st.st_ino] = st.st_blocks * 512
    return total + sum(size for ino, size in held.items() if ino not in mapped)


def _cleanup(cgroup: _Cgroups, host_tmp: Path | None, lease: UidLease | None = None,
             claim: TreeClaim | None = None) -> None:
    cgroup.kill_all()
    cgroup.remove()
    if host_tmp is not None:
        remove_tree(host_tmp)
    for held in (lease, claim):  # its processes are gone with the PID namespace (and the cgroup)
        if held is not None:
            held.release()


@dataclass(frozen=True)
class _TreeUsage:
    """What the writable paths hold: allocated bytes and entries (each counted up to its limit and a bit), or
    why they could not be counted (``unwalkable``: over every limit)."""

    bytes: int
    entries: int
    unwalkable: str = ""

    def over(self, limits: Limits) -> tuple[bool, bool]:
        """(over the disk limit, over the entries limit)."""
        return (limits.disk_bytes is not None and (self.bytes > limits.disk_bytes or bool(self.unwalkable)),
                limits.entries is not None and (self.entries > limits.entries or bool(self.unwalkable)))


def _tree_usage(paths: Sequence[Path], max_bytes: int | None, max_entries: int | None) -> _TreeUsage:
    """Disk bytes (allocated blocks) and entries (files, folders, links) under ``paths``, links not
    followed, by directory descriptor (:func:`~cuda_gym.trees.walk_tree`). The walk stops once either is
    past its bound (so a folder of millions of files costs no more than the bound's worth of ``stat``
    calls)."""
    total = entries = 0
    stop_bytes = max_bytes if max_bytes is not None else math.inf
    stop_entries = max_entries if max_entries is not None else math.inf
    seen: set[tuple[int, int]] = set()

    def add(st: os.stat_result) -> None:
        nonlocal total
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512

    try:
        for top in paths:
            try:
                add(os.lstat(top))
            except FileNotFoundError:
                continue
            for entry in walk_tree(top):
                entries += 1
                add(entry.stat)
                if total > stop_bytes or entries > stop_entries:
                    return _TreeUsage(total, entries)
    except (TreeUnwalkable, OSError) as exc:
        return _TreeUsage(total, entries, unwalkable=str(exc))
    return _TreeUsage(total, entries)


@functools.cache
def _setpriv_has_pdeathsig() -> bool:
    try:
        out = subprocess.run([_SETPRIV, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--pdeathsig" in out


_SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
_SETPRIV_DROP = ["--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"]
_PRELUDE = """
import ctypes, os, sys
nrs = {"x86_64": (250, 317), "aarch64": (219, 277)}.get(os.uname().machine)
if nrs:
    libc = ctypes.CDLL(None, use_errno=True)
    call, L = libc.syscall, ctypes.c_long
    call.restype = ctypes.c_long
    keyctl, seccomp = L(nrs[0]), L(nrs[1])
    if sys.argv[1] == "1":
        for ring in (-4, -5):
            call(keyctl, L(7), L(ring))
        kept = call(keyctl, L(22), L(-1), L(-3))
        if kept > 0:
            call(keyctl, L(7), L(kept))
    call(keyctl, L(1), None)
    prog = bytes.fromhex(sys.argv[2])
    buf = ctypes.create_string_buffer(prog, len(prog))
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Prog(len(prog) // 8, ctypes.addressof(buf))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or call(seccomp, L(1), L(0), ctypes.byref(fprog)) != 0:
        sys.stderr.write("sandbox setup: the key syscall filter could not be installed\\n")
        os._exit(125)
os.execvp(sys.argv[3], sys.argv[3:])
"""
"""Run in the sandbox, as its uid, before the command. The kernel keeps keys and keyrings past the sandbox: the
next sandbox of a uid read 196 keys an earlier one left, its key quota used up (red team 9, K1); one that opened
its user keyring to every uid, or took the write right from it, beat a clear (the recheck). So the prelude
gives the sandbox a new, empty session keyring (not the caller's), clears what a uid of its own still holds
(user, user-session and persistent keyrings: keys left before the filter), then installs
:func:`cuda_gym.seccomp_bpf.sandbox_filter` (no key syscalls, no other ABI) and runs the command."""
"""What every sandboxed command gives up before it starts: all capabilities, and gaining any by exec."""


def spawn(argv: list[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen`` from this process's spawner thread (``cuda_gym.job_thread``). The kernel's
    parent-death signal (bwrap's ``--die-with-parent``, ``setpriv --pdeathsig``, a helper's own ``prctl``:
    ``die_with_parent``) fires when the *thread* that forked the child ends, not the process: a sandbox
    started from a short-lived worker thread would die with that thread. The spawner lives as long as the
    process, so its children die exactly when the process does."""

    def popen() -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, **popen_kwargs)

    try:
        spawner = job_thread("cuda_gym-spawn")
    except RuntimeError:  # interpreter shutting down: no new threads; fork from here
        return popen()
    return spawner.run(popen)


OOM_SCORE_ADJ = 1000
"""Every sandbox's ``oom_score_adj``: the out-of-memory killer's first choice, before any trusted process."""


def killed_with_this_process(argv: list[str]) -> list[str]:
    """``argv`` behind ``setpriv --pdeathsig KILL`` (where setpriv has it): the kernel kills it when this
    process dies, when it is started with ``spawn``."""
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *argv] if _setpriv_has_pdeathsig() else list(argv)


def die_with_parent(parent: int) -> bool:
    """In a helper process: ask for ``SIGKILL`` when the thread that forked it ends (``prctl``
    ``PR_SET_PDEATHSIG``; also where ``setpriv`` lacks ``--pdeathsig``), then check that ``parent`` is still
    its parent. ``False``: it was orphaned before the signal was set, and should end at once."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
        logger.warning("a helper process cannot ask to die with its parent: errno %d", ctypes.get_errno())
    return os.getppid() == parent




def _soft_hard(value: int | tuple[int, int]) -> str:
    return f"{value[0]}:{value[1]}" if isinstance(value, tuple) else str(value)


def _apply_rlimits(values: Mapping[str, int | tuple[int, int]]) -> None:  # pragma: no cover - runs in the child
    import resource

    names = {"core": resource.RLIMIT_CORE, "cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS,
             "data": resource.RLIMIT_DATA, "fsize": resource.RLIMIT_FSIZE, "nofile": resource.RLIMIT_NOFILE,
             "nproc": resource.RLIMIT_NPROC}
    for key, value in values.items():
        resource.setrlimit(names[key], value if isinstance(value, tuple) else (value, value))


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except OSError:
        pass


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_MEMORY_PATTERNS = re.compile(r"MemoryError|std::bad_alloc|Cannot allocate memory|out of memory|"
                              r"memory exhausted|virtual memory exhausted", re.I)


@dataclass(frozen=True)
class _Stopped:
    """Which limits the supervisor itself stopped a command at (rather than the kernel)."""

    disk: bool = False
    entries: bool = False
    memory: bool = False
    processes: bool = False
    unwalkable: str = ""
    """Why the writable paths could not be counted when the command was stopped (:class:`TreeUnwalkable`)."""


def _reason(limits: Limits, returncode: int, sig: int | None, timed_out: bool, output: str,
            cgroup: _Cgroups, usage: _TreeUsage | None = None, stopped: _Stopped = _Stopped()) -> str:
    reasons = []
    processes_stopped, memory_stopped = stopped.processes, stopped.memory
    if limits.processes is not None:
        hit = processes_stopped or (cgroup.limit_hit("pids") if cgroup.has("pids") else (
            "Resource temporarily unavailable" in output and "fork" in output.lower()))
        if hit:
            reasons.append(f"process limit reached ({limits.processes} processes and threads)"
                           f"{' (the sandbox stopped them)' if processes_stopped else ''}")
    memory_hit = limits.memory_bytes is not None and (memory_stopped or cgroup.limit_hit("memory"))
    if memory_hit:
        reasons.append(f"memory limit of {_fmt_bytes(limits.memory_bytes)} exceeded by the command's processes "  # type: ignore[arg-type]
                       f"together ({'the sandbox stopped them' if memory_stopped else 'the kernel killed one'})")
    if timed_out:
        reasons.append(f"killed after {limits.wall_s:g} s wall-time limit")
    elif returncode != 0:
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and "CPU time limit" in output):
            reasons.append(f"killed at the {limits.effective_cpu_s():g} s CPU-time limit")
        elif limits.file_bytes is not None and (sig == signal.SIGXFSZ or "File too large" in output
                                                or "File size limit exceeded" in output):
            reasons.append(f"file size limit exceeded (files are capped at {_fmt_bytes(limits.file_bytes)})")
        elif limits.memory_bytes is not None and not memory_hit and _MEMORY_PATTERNS.search(output):
            reasons.append(f"memory limit of {_fmt_bytes(limits.memory_bytes)} exceeded")
    if returncode != 0 and "No space left on device" in output and limits.tmpfs_bytes is not None:
        reasons.append(f"no space left (each private tmpfs, /tmp, /dev/shm and /run, holds "
                       f"{_fmt_bytes(limits.tmpfs_bytes)}; the disk may be full too)")
    disk_over, entries_over = usage.over(limits) if usage is not None else (False, False)
    unwalkable = stopped.unwalkable or (usage.unwalkable if usage is not None else "")
    if unwalkable and (disk_over or entries_over or stopped.disk or stopped.entries):
        reasons.append(f"the writable folders could not be measured ({unwalkable})"
                       f"{' (the command was stopped)' if stopped.disk or stopped.entries else ''}: they count as "
                       "over the disk and entries limits; delete what is there (rm -r)")
    elif limits.disk_bytes is not None and (stopped.disk or disk_over):
        reasons.append(f"disk limit exceeded: the writable files hold more than {_fmt_bytes(limits.disk_bytes)}"
                       f"{' (the command was stopped)' if stopped.disk else ''}; delete some")
    if limits.entries is not None and (stopped.entries or entries_over) and not unwalkable:
        reasons.append(f"entries limit exceeded: the writable folders hold more than {limits.entries} files, folders "
                       f"and links{' (the command was stopped)' if stopped.entries else ''}; delete some (rm -r)")
    return "; ".join(reasons)
