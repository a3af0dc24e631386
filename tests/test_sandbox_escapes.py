"""Escape probes of issue 12, in every isolating mode: each one failed under the old unshare mode.

The same probe runs under bwrap and under the unshare fallback (the GPU image's production mode);
both must hold. Run one mode with ``CUDA_GYM_SANDBOX=unshare python3 -m pytest tests/test_sandbox_escapes.py``
(the parametrization still covers every mode that works here).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cuda_gym.sandbox import MODE_ENV, Limits, Sandbox, _cgroup_parent, available_modes
from sandbox_helpers import NAMESPACE_PROBE, NAMESPACES_REFUSED, survivors

REPO = Path(__file__).resolve().parent.parent
ISOLATING = [m for m in available_modes() if m != "limits"]
pytestmark = pytest.mark.skipif(not ISOLATING, reason="neither bwrap nor unshare works here")


@pytest.fixture(params=ISOLATING)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


CONNECT_UNIX = """
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(3)
addr = sys.argv[1].replace("@", "\\0", 1)
try:
    s.connect(addr); print("CONNECTED")
except OSError as e:
    print("FAILED", e)
"""


class _UnixListener:
    """A host Unix socket service (a root daemon's control socket, say) that counts connections."""

    def __init__(self, address: str):
        self.address = address
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(address.replace("@", "\0", 1))
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def _probe(sb: Sandbox, box: Path, address: str) -> str:
    return sb.run(["python3", "-c", CONNECT_UNIX, address], cwd=box, limits=Limits(wall_s=30)).output


def test_host_unix_sockets_not_connectable(mode: str, box: Path, tmp_path: Path) -> None:
    """Filesystem sockets outside the workspace are invisible, abstract ones live in another namespace."""
    host_dir = tmp_path / "host_service"
    host_dir.mkdir()
    fs = _UnixListener(str(host_dir / "control.sock"))
    abstract = _UnixListener(f"@cuda_gym_test_{os.getpid()}_{mode}")
    inside = _UnixListener(str(box / "own.sock"))  # control: a socket in the workspace is the agent's own
    try:
        sb = Sandbox([box], mode=mode)
        for lst in (fs, abstract):
            out = _probe(sb, box, lst.address)
            assert "FAILED" in out and "CONNECTED" not in out, (lst.address, out)
            assert lst.accepted == 0
        assert "CONNECTED" in _probe(sb, box, inside.address)
        # Control: where the sandbox shares the host's network, the abstract socket is reached.
        assert "CONNECTED" in _probe(Sandbox([box], mode=mode, network=True), box, abstract.address)
    finally:
        for lst in (fs, abstract, inside):
            lst.close()


def test_host_files_outside_the_sandbox_not_readable(mode: str, box: Path, tmp_path: Path) -> None:
    """/etc/shadow, the home directory, the repository's .git, another episode's workspace."""
    other = tmp_path / "other_episode"
    other.mkdir()
    canaries = [other / "model_new.py", Path.home() / f".cuda_gym_canary_{os.getpid()}_{mode}"]
    for c in canaries:
        c.write_text("CANARY-SECRET\n")
    targets = [Path("/etc/shadow"), REPO / ".git" / "HEAD", REPO / "pyproject.toml", *canaries]
    try:
        for t in targets:
            assert t.read_text(), t  # readable on the host
        res = Sandbox([box], mode=mode).run("; ".join(f"cat {t} && echo READ {t}" for t in targets) +
                                            f"; echo LISTING; ls -a {REPO} {REPO / '.git'} {Path.home()}", cwd=box)
        assert "READ" not in res.output and "CANARY-SECRET" not in res.output, res.output
        assert "ref: refs/" not in res.output and "[project]" not in res.output
        assert ".cuda_gym_canary" not in res.output.split("LISTING", 1)[1]
    finally:
        for c in canaries:
            c.unlink()


KEEPER = """
import sys, threading, time
from pathlib import Path
from cuda_gym.sandbox import Limits, Sandbox
box, marker = Path(sys.argv[1]), sys.argv[2]
one, two = box / "one", box / "two"  # two sandboxes at once write trees of their own (a uid each may own one)
one.mkdir(); two.mkdir()
sb = Sandbox([one], mode=sys.argv[3])
procs = []
# Started from a thread that ends at once: the sandbox must outlive the thread, not the process.
t = threading.Thread(target=lambda: procs.append(sb.start(f"sleep {marker}1 & setsid sleep {marker}2 & wait",
                                                          cwd=one, limits=Limits(wall_s=600))))
t.start(); t.join()
other = Sandbox([two], mode=sys.argv[3])
threading.Thread(target=lambda: other.run(f"sleep {marker}3", cwd=two, limits=Limits(wall_s=600)),
                 daemon=True).start()
print("started", flush=True)
time.sleep(600)
"""


def _leftovers(pid: int) -> list[Path]:
    """Cgroup and temp folders that sandboxes started by process ``pid`` made."""
    import tempfile

    found = list(Path(tempfile.gettempdir()).glob(f"cuda_gym_sbx_*-{pid}_*"))
    for controller in ("pids", "memory"):
        parent = _cgroup_parent(controller)
        if parent is not None:
            found += list(parent[0].glob(f"cuda_gym-*-{pid}-*"))
    return found


def test_sandbox_dies_when_its_parent_is_killed(mode: str, box: Path) -> None:
    marker = f"93{os.getpid() % 1000}.{ord(mode[0])}"
    parent = subprocess.Popen([sys.executable, "-c", KEEPER, str(box), marker, mode], stdout=subprocess.PIPE,
                              text=True, cwd=REPO)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 20
        while len(survivors(marker, "sleep")) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(survivors(marker, "sleep")) == 3, "the sandboxes did not start (or died with their thread)"
        time.sleep(0.5)
        assert len(survivors(marker, "sleep")) == 3, "a sandbox died with the thread that started it"
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while survivors(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert survivors(marker) == []
        # What the killed parent could not clean up (its cgroups, unshare mode's temp dirs) goes at the
        # next start of a sandbox in another process.
        left = _leftovers(parent.pid)
        if mode == "unshare" or _cgroup_parent("pids") is not None:
            assert left, "the killed parent left nothing behind: the sweep below is not tested"
        from cuda_gym import sandbox as sandbox_module

        sandbox_module._sweep_stale.cache_clear()
        assert Sandbox([box], mode=mode).run("true", cwd=box).ok
        assert _leftovers(parent.pid) == []
    finally:
        parent.kill()
        parent.wait()
        for pid in survivors(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(_cgroup_parent("memory") is None, reason="no writable memory cgroup here: the memory limit "
                    "holds per process only (see docs/sandbox.md)")
def test_memory_of_several_processes_is_bounded_together(mode: str, box: Path) -> None:
    one = "import time; b = b'x' * (300 << 20); print('HELD', flush=True); time.sleep(3)"
    cmd = f"for i in 1 2 3; do python3 -c \"{one}\" & done; wait"
    res = Sandbox([box], mode=mode).run(cmd, cwd=box, limits=Limits(memory_bytes=512 * 2**20, wall_s=60))
    assert res.output.splitlines().count("HELD") < 3, res.output
    assert "memory limit of 512 MiB exceeded by the command's processes together" in res.reason, res.reason
    # Control: the same processes one after another fit.
    res = Sandbox([box], mode=mode).run(cmd.replace("&", ";").replace("time.sleep(3)", "0"), cwd=box,
                                        limits=Limits(memory_bytes=512 * 2**20, wall_s=60))
    assert res.output.splitlines().count("HELD") == 3 and res.reason == "", res.output + res.reason


def test_memory_bounded_together_without_a_cgroup(mode: str, box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no memory cgroup can be made (the lent GPU image), the sandbox sums the PSS of its PID
    namespace and stops it past the limit. The host here has cgroups: their probe is made to find none."""
    from cuda_gym import sandbox as sandbox_module

    real = sandbox_module._cgroup_parent
    monkeypatch.setattr(sandbox_module, "_cgroup_parent", lambda c: None if c == "memory" else real(c))
    one = "import time; b = b'x' * (300 << 20); print('HELD', flush=True); time.sleep(20)"
    cmd = f"for i in 1 2 3; do python3 -c \"{one}\" & done; wait"
    res = Sandbox([box], mode=mode).run(cmd, cwd=box, limits=Limits(memory_bytes=512 * 2**20, wall_s=60))
    assert res.reason == ("memory limit of 512 MiB exceeded by the command's processes together (the sandbox "
                          "stopped them)"), res.reason + res.output
    assert not res.timed_out and res.seconds < 15
    # Control: one such process alone is left alone.
    res = Sandbox([box], mode=mode).run(["python3", "-c", one.replace("20)", "2)")], cwd=box,
                                        limits=Limits(memory_bytes=512 * 2**20, wall_s=60))
    assert res.ok and res.output.strip() == "HELD", res.reason + res.output


def test_a_sandboxed_command_makes_no_namespaces(mode: str, box: Path) -> None:
    """The watchdog counts the processes of the sandbox's own PID namespace: six 200 MiB processes in a nested one
    ran under a 512 MiB limit on a host without a memory cgroup (red team 10, F4), and a nested user namespace
    pinned thousands of network namespaces whose teardown no sandbox was charged for (F3). Every sandbox, of a
    uid of its own or not, refuses ``unshare`` and ``clone`` with a namespace flag and ``setns`` (``EPERM``), and
    ``clone3`` (``ENOSYS``: the C library falls back to ``clone``); threads, ``fork`` and ``exec`` work."""
    for own in (True, False):
        res = Sandbox([box], mode=mode, own_uid=own).run(["python3", "-c", NAMESPACE_PROBE, "plain"], cwd=box,
                                                          limits=Limits(wall_s=60))
        assert res.ok and res.output.strip() == NAMESPACES_REFUSED, (own, res.output, res.reason)


LEADER_GONE = """
import ctypes, threading, time
def hold():
    time.sleep(1)  # the main thread has ended by then
    b = b'x' * (300 << 20)
    print('HELD', flush=True)
    time.sleep(20)
threading.Thread(target=hold).start()
ctypes.CDLL(None).pthread_exit(None)  # the main thread ends; the process lives on in the other
"""


def test_memory_of_a_process_whose_main_thread_ended_counts_without_a_cgroup(mode: str, box: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A process whose main thread exited has an empty ``smaps_rollup`` there, while its other threads keep its
    memory: six such processes held 1.2 GB under a 512 MiB limit (red team 10's recheck, R2). The host here has
    cgroups: their probe is made to find none."""
    from cuda_gym import sandbox as sandbox_module

    real = sandbox_module._cgroup_parent
    monkeypatch.setattr(sandbox_module, "_cgroup_parent", lambda c: None if c == "memory" else real(c))
    cmd = f"for i in 1 2 3; do python3 -c \"{LEADER_GONE}\" & done; wait"
    res = Sandbox([box], mode=mode).run(cmd, cwd=box, limits=Limits(memory_bytes=512 * 2**20, wall_s=60))
    assert res.reason == ("memory limit of 512 MiB exceeded by the command's processes together (the sandbox "
                          "stopped them)") and res.seconds < 15, (res.reason, res.output)


HOLD_MEMFDS = """
import os, time
chunk = b"x" * (8 << 20)
fds = [os.memfd_create("held") for _ in range({count})]
for fd in fds:
    os.write(fd, chunk)  # never mapped: in no process's size
print("HELD", flush=True)
time.sleep({nap})
"""


def test_shared_memory_outside_every_process_counts_without_a_cgroup(mode: str, box: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no memory cgroup can be made (the lent GPU image), memory in memfds no process maps and in the private
    tmpfs mounts counts too: a sandbox held 1 GiB in memfds under a 256 MiB limit, and the kernel's out-of-memory
    killer took another evaluation's sandbox (red team 10, F2). The host here has cgroups: their probe is made to
    find none."""
    from cuda_gym import sandbox as sandbox_module

    real = sandbox_module._cgroup_parent
    monkeypatch.setattr(sandbox_module, "_cgroup_parent", lambda c: None if c == "memory" else real(c))
    limits = Limits(memory_bytes=256 * 2**20, wall_s=60)
    stopped = ("memory limit of 256 MiB exceeded by the command's processes together (the sandbox stopped them)")
    sb = Sandbox([box], mode=mode)
    res = sb.run(["python3", "-c", HOLD_MEMFDS.format(count=48, nap=20)], cwd=box, limits=limits)
    assert res.reason == stopped and res.seconds < 15, (res.reason, res.output)
    res = sb.run("head -c 384M /dev/zero > /dev/shm/held; echo HELD; sleep 20", cwd=box, limits=limits)
    assert res.reason == stopped and res.seconds < 15, (res.reason, res.output)
    # Control: what fits stays.
    res = sb.run(["python3", "-c", HOLD_MEMFDS.format(count=8, nap=2)], cwd=box, limits=limits)
    assert res.ok and res.output.strip() == "HELD", (res.reason, res.output)


def test_fork_bomb_stopped_without_a_pids_cgroup(mode: str, box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root without a pids cgroup (the lent GPU image): RLIMIT_NPROC does not hold for uid 0, the sandbox's
    task count does. The host here has cgroups: their probe is made to find none."""
    from cuda_gym import sandbox as sandbox_module

    real = sandbox_module._cgroup_parent
    monkeypatch.setattr(sandbox_module, "_cgroup_parent", lambda c: None if c == "pids" else real(c))
    marker = f"cudagymbomb2{mode}"
    # A steady spawner, not an exponential bomb: without a cgroup nothing stops a real bomb between two
    # scans, and one exhausted this host's PIDs (other shells failed to fork); 3000 sleepers in a row
    # pass the bound just the same.
    nap = f"31.{ord(mode[0])}{os.getpid() % 1000}"  # the sleepers' own mark, for the survivors check
    spawn = f"{marker}(){{ for i in $(seq 3000); do sleep {nap} & done; wait; }}; {marker}"
    res = Sandbox([box], mode=mode).run(spawn, cwd=box, limits=Limits(wall_s=60, processes=200))
    assert res.reason.startswith("process limit reached (200 processes and threads) (the sandbox stopped them)"), \
        res.reason
    assert res.seconds < 20 and not res.timed_out
    assert survivors(marker) == [] and survivors(nap) == []


def test_private_tmpfs_are_size_bounded(mode: str, box: Path) -> None:
    limits = Limits(tmpfs_bytes=8 * 2**20)
    script = "; ".join(f"head -c 20M /dev/zero > {d}/fill; echo SIZE {d} $(stat -c %s {d}/fill)"
                       for d in ("/tmp", "/dev/shm", "/run"))
    res = Sandbox([box], mode=mode).run(script + "; echo x > /dev/new_node && echo WROTE_DEV", cwd=box, limits=limits)
    sizes = [int(line.split()[2]) for line in res.output.splitlines() if line.startswith("SIZE ")]
    assert len(sizes) == 3 and all(s <= 8 * 2**20 for s in sizes), res.output
    assert "WROTE_DEV" not in res.output
    assert "no space left (each private tmpfs, /tmp, /dev/shm and /run, holds 8 MiB" in res.reason, res.reason
    # Printing the words is not hitting the bound.
    assert Sandbox([box], mode=mode).run("echo 'No space left on device'", cwd=box, limits=limits).reason == ""


def test_workspace_disk_bound_is_reported(mode: str, box: Path) -> None:
    sb = Sandbox([box], mode=mode)
    res = sb.run("head -c 3M /dev/urandom > blob", cwd=box, limits=Limits(disk_bytes=2**20))
    assert res.returncode == 0
    assert res.reason == "disk limit exceeded: the writable files hold more than 1 MiB; delete some"
    res = sb.run("rm blob", cwd=box, limits=Limits(disk_bytes=2**20))
    assert res.ok, res.reason
    # A command that keeps writing (in many files, each under the file-size limit) is stopped while it runs.
    res = sb.run("i=0; while :; do head -c 4M /dev/zero > f$i; i=$((i+1)); done", cwd=box,
                 limits=Limits(disk_bytes=64 * 2**20, wall_s=60))
    assert not res.timed_out and res.seconds < 20, res
    assert res.reason == ("disk limit exceeded: the writable files hold more than 64 MiB (the command was stopped); "
                          "delete some"), res.reason
    for f in box.glob("f*"):
        f.unlink()


MAKE_EMPTY_FILES = "python3 -c 'import os\nfor i in range(10**7): os.close(os.open(f\"e{i}\", os.O_CREAT | os.O_WRONLY))'"
"""Red-team D's A3: empty files, as fast as Python makes them (they allocate no blocks: no disk limit fires)."""


def test_workspace_entries_bound_is_reported(mode: str, box: Path) -> None:
    sb = Sandbox([box], mode=mode)
    limits = Limits(entries=5_000, wall_s=60)
    res = sb.run(MAKE_EMPTY_FILES, cwd=box, limits=limits)
    made = len(os.listdir(box))
    assert not res.timed_out and res.seconds < 20 and 5_000 < made < 1_000_000, (res, made)
    assert res.reason == ("entries limit exceeded: the writable folders hold more than 5000 files, folders and links "
                          "(the command was stopped); delete some (rm -r)"), res.reason
    # Still over it when a quick command ends: said so; deleting them is allowed and clears it.
    assert sb.run("true", cwd=box, limits=limits).reason.startswith("entries limit exceeded: ")
    res = sb.run("rm -rf ./*", cwd=box, limits=limits)
    assert res.ok and os.listdir(box) == [], (res, len(os.listdir(box)))


DEEP = "n=$(printf 'd%.0s' $(seq 250)); for i in $(seq 20); do mkdir $n; cd $n; done; "
"""Into a folder whose path is 5 KiB long: a walk by path names (ENAMETOOLONG) saw nothing below it."""


def test_what_lies_below_a_path_longer_than_path_max_counts(mode: str, box: Path) -> None:
    """Red team 10, F1: 300 MiB and 5,000 files below a 5 KiB path passed a 64 MiB and 1,000-entry limit."""
    sb = Sandbox([box], mode=mode)
    res = sb.run(DEEP + "head -c 48M /dev/zero > big; sleep 20", cwd=box, limits=Limits(disk_bytes=16 * 2**20, wall_s=60))
    assert res.reason == ("disk limit exceeded: the writable files hold more than 16 MiB (the command was stopped); "
                          "delete some"), res.reason + res.output
    assert sb.run("rm -r ./*", cwd=box).ok
    res = sb.run(DEEP + "seq 3000 | xargs touch; sleep 20", cwd=box, limits=Limits(entries=1000, wall_s=60))
    assert res.reason.startswith("entries limit exceeded: the writable folders hold more than 1000 files"), res.reason
    assert sb.run("rm -r ./*", cwd=box).ok


def test_folders_too_deep_to_measure_stop_the_command(mode: str, box: Path) -> None:
    res = Sandbox([box], mode=mode).run("mkdir -p " + "d/" * 80 + "; sleep 20", cwd=box,
                                        limits=Limits(entries=1000, wall_s=60))
    assert res.reason.startswith("the writable folders could not be measured (folders nested deeper than 64) (the "
                                 "command was stopped)"), res.reason
    assert not res.timed_out


def test_no_isolating_mode_refuses_unless_opted_out(tmp_path: Path) -> None:
    """Without bwrap and unshare on PATH, agent code does not silently run with limits only."""
    code = textwrap.dedent("""
        from cuda_gym.errors import SandboxError
        from cuda_gym.sandbox import sandbox_mode
        try:
            print("MODE", sandbox_mode())
        except SandboxError as e:
            print("REFUSED", e)
    """)
    env = {k: v for k, v in os.environ.items() if k != MODE_ENV}
    env["PATH"] = str(tmp_path)  # an empty directory: no bwrap, no unshare
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO).stdout
    assert out.startswith("REFUSED") and "install bubblewrap" in out and f"{MODE_ENV}=limits" in out, out
    env[MODE_ENV] = "limits"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO).stdout
    assert out.strip() == "MODE limits", out


def test_readonly_path_made_a_link_does_not_bind_its_target(mode: str, box: Path, tmp_path: Path) -> None:
    """A protected workspace file replaced by a link to a host file must not bring that file inside."""
    secret = tmp_path / "judge_secret.txt"
    secret.write_text("JUDGE-SECRET\n")
    (box / "model.py").symlink_to(secret)
    res = Sandbox([box], readonly=[box / "model.py"], mode=mode).run("cat model.py", cwd=box)
    assert "JUDGE-SECRET" not in res.output, res.output


def test_unshare_init_without_pivot_root_hides_the_host(box: Path, tmp_path: Path) -> None:
    """The init's fallback where pivot_root is refused (/ is an initramfs): move the root and chroot."""
    if "unshare" not in ISOLATING:
        pytest.skip("unshare mode not available")
    import json
    import shutil
    import tempfile

    canary = tmp_path / "canary.txt"
    canary.write_text("CANARY-SECRET\n")
    sb = Sandbox([box], mode="unshare")
    root = Path(tempfile.mkdtemp(prefix="cuda_gym_sbx_"))
    try:
        argv = sb._unshare_args(root, box, Limits(), None)
        i = next(n for n, a in enumerate(argv) if a.startswith("{"))
        argv[i] = json.dumps({**json.loads(argv[i]), "pivot_root": False})
        # chroot() again is the classic way out of a chroot: it needs CAP_SYS_CHROOT, which is dropped.
        cmd = (f"cat {canary} /etc/shadow; touch /usr/x && echo WROTE; "
               "python3 -c \"import os; os.chroot('/tmp'); print('CHROOTED')\"; echo inside")
        out = subprocess.run([*argv, "/bin/bash", "-c", cmd], cwd=box, capture_output=True, text=True,
                             env=sb.env_for(box, Path("/tmp"), None), timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert out.returncode == 0 and "inside" in out.stdout, out.stdout + out.stderr
    assert "CANARY-SECRET" not in out.stdout and "root:" not in out.stdout and "WROTE" not in out.stdout
    assert "CHROOTED" not in out.stdout and "PermissionError" in out.stderr


SUBMOUNT_PROBE = """
import os, sys
from cuda_gym.sandbox import Sandbox
box, lib = sys.argv[1], sys.argv[2]
res = Sandbox([box], mode=sys.argv[3]).run(f"cat {lib}/libdrv.so; echo x >> {lib}/libdrv.so && echo WROTE", cwd=box)
print(res.output)
"""


def test_file_bound_below_a_runtime_path_is_visible_read_only(mode: str, box: Path, tmp_path: Path) -> None:
    """NVIDIA's container runtime binds single driver libraries below /usr: a read-only bind must show
    such submounts, read-only too. Made here in a private mount namespace with LD_LIBRARY_PATH's folder."""
    if os.geteuid() != 0:
        pytest.skip("making the submount needs root (unshare --mount)")
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libdrv.so").write_text("")
    (tmp_path / "real.so").write_text("DRIVER-LIBRARY\n")
    (tmp_path / "real.so").chmod(0o666)  # anyone may write it: only the read-only bind may refuse the write
    script = (f"mount --bind {tmp_path / 'real.so'} {lib / 'libdrv.so'} && "
              f"exec {sys.executable} -c '{SUBMOUNT_PROBE}' {box} {lib} {mode}")
    out = subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script],
                         env={**os.environ, "LD_LIBRARY_PATH": str(lib)}, capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert "DRIVER-LIBRARY" in out.stdout, out.stdout + out.stderr
    assert "WROTE" not in out.stdout and "Read-only file system" in out.stdout
    assert (tmp_path / "real.so").read_text() == "DRIVER-LIBRARY\n"


def test_checkout_on_pythonpath_is_not_bound_whole(mode: str, box: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Judge workers run with PYTHONPATH=<checkout>: the sandbox binds the package folders, not the
    checkout (its .git, tests, sources); a --target folder on PYTHONPATH is bound (importable)."""
    from cuda_gym import sandbox as sandbox_module

    target = tmp_path / "target_site"
    (target / "extra_pkg").mkdir(parents=True)
    (target / "extra_pkg" / "__init__.py").write_text("VALUE = 'from --target'\n")
    (target / "extra_pkg-1.0.dist-info").mkdir()  # what pip --target writes beside every package
    # Dependencies installed with --target (the GPU image's gymnasium) stay on the path.
    path = ":".join([str(REPO), str(target)] + [p for p in os.environ.get("PYTHONPATH", "").split(":") if p])
    monkeypatch.setenv("PYTHONPATH", path)
    sandbox_module._runtime_paths.cache_clear()
    try:
        res = Sandbox([box], mode=mode).run(
            f"cat {REPO / '.git' / 'HEAD'} {REPO / 'pyproject.toml'}; ls {REPO}; "
            "python3 -c 'import cuda_gym.sandbox, extra_pkg; print(\"IMPORTED\", extra_pkg.VALUE)'",
            cwd=box, env={"PYTHONPATH": path}, limits=Limits(wall_s=60))
    finally:
        sandbox_module._runtime_paths.cache_clear()
    assert "ref: refs/" not in res.output and "[project]" not in res.output, res.output
    assert "IMPORTED from --target" in res.output, res.output
    assert "tests" not in res.output.split()


def test_pythonpath_project_folder_is_not_bound(mode: str, box: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Red-team D's A6: a trainer run as PYTHONPATH=<project> must not show the project's .env to bash;
    an LD_LIBRARY_PATH folder without shared libraries is not bound, one with them is (read-only)."""
    from cuda_gym import sandbox as sandbox_module

    project, notes, libs = tmp_path / "project", tmp_path / "notes", tmp_path / "libs"
    for folder in (project, notes, libs):
        folder.mkdir()
    (project / ".env").write_text("HF_TOKEN=hf_SECRET_canary_123\n")
    (project / "project.egg-info").mkdir()  # an editable install leaves this: still a project, not an install
    (notes / "secret.txt").write_text("LD_CANARY\n")
    (libs / "libfoo.so.1").write_text("SHARED-LIBRARY\n")
    monkeypatch.setenv("PYTHONPATH", ":".join([str(project), *filter(None, os.environ.get("PYTHONPATH", "").split(":"))]))
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{notes}:{libs}")
    sandbox_module._runtime_paths.cache_clear()
    try:
        res = Sandbox([box], mode=mode).run(
            f"cat {project / '.env'} {notes / 'secret.txt'} {libs / 'libfoo.so.1'}; ls {project}; "
            f"echo x >> {libs / 'libfoo.so.1'} && echo WROTE", cwd=box, limits=Limits(wall_s=30))
    finally:
        sandbox_module._runtime_paths.cache_clear()
    assert "hf_SECRET_canary_123" not in res.output and "egg-info" not in res.output, res.output
    assert "LD_CANARY" not in res.output, res.output
    assert "SHARED-LIBRARY" in res.output and "WROTE" not in res.output, res.output


USERNS_PROBE = """
import sys
from cuda_gym.sandbox import Sandbox
box, canary = sys.argv[1], sys.argv[2]
res = Sandbox([box], mode="unshare").run(f"cat {canary} /etc/shadow; touch /usr/x && echo WROTE; echo ok > f && echo INSIDE",
                                         cwd=box)
print(res.returncode, res.output)
"""


def test_unshare_mode_inside_a_user_namespace(box: Path, tmp_path: Path) -> None:
    """As in a rootless container (root of a user namespace; the host's mounts locked): same isolation."""
    if "unshare" not in ISOLATING:
        pytest.skip("unshare mode not available")
    if subprocess.run(["unshare", "--user", "--map-root-user", "true"], capture_output=True).returncode != 0:
        pytest.skip("user namespaces are not allowed here")
    canary = tmp_path / "canary.txt"
    canary.write_text("CANARY-SECRET\n")
    out = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
                          sys.executable, "-c", USERNS_PROBE, str(box), str(canary)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "INSIDE" in out.stdout, out.stdout + out.stderr
    assert "CANARY-SECRET" not in out.stdout and "WROTE" not in out.stdout and "root:" not in out.stdout
    assert (box / "f").read_text() == "ok\n"
