"""Tests of cuda_gym.sandbox: real escapes, real limits, in every mode that works on this machine."""

from __future__ import annotations

import errno
import os
import selectors
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cuda_gym.errors import SandboxError
from cuda_gym.sandbox import MODE_ENV, OOM_SCORE_ADJ, GiB, Limits, Sandbox, available_modes, sandbox_mode
from sandbox_helpers import cgroup_here, survivors

REPO = Path(__file__).resolve().parent.parent
MODES = available_modes()
ISOLATING = [m for m in MODES if m != "limits"]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=ISOLATING or [pytest.param("none", marks=pytest.mark.skip(reason="no isolating mode here"))])
def iso_mode(request: pytest.FixtureRequest) -> str:
    return request.param


def test_mode_detection_and_forcing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sandbox_mode() in ("bwrap", "unshare", "limits")
    assert "limits" in MODES
    monkeypatch.setenv(MODE_ENV, "limits")
    assert sandbox_mode() == "limits"
    monkeypatch.setenv(MODE_ENV, "docker")
    with pytest.raises(SandboxError, match="not a sandbox mode"):
        sandbox_mode()


def test_bwrap_is_used_here_when_installed() -> None:
    if not Path("/usr/bin/bwrap").exists():
        pytest.skip("bubblewrap not installed")
    assert "bwrap" in MODES


def test_runs_command_with_minimal_env(mode: str, box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_GYM_TEST_SECRET", "hunter2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    sb = Sandbox([box], mode=mode, extra_env={"FROM_EXTRA": "x"})
    res = sb.run("pwd; echo out; echo err >&2; env; exit 7", cwd=box, env={"FROM_CALL": "y"})
    assert res.returncode == 7 and res.reason == "" and not res.timed_out and res.mode == mode
    lines = res.output.splitlines()
    assert lines[0] == str(box)
    assert "out" in lines and "err" in lines
    assert "hunter2" not in res.output
    for expected in ("FROM_EXTRA=x", "FROM_CALL=y", "CUDA_VISIBLE_DEVICES=3", "LC_ALL=C"):
        assert expected in lines
    assert not any(line.startswith("HOME=" + str(Path.home()) + "/") or line == f"HOME={Path.home()}"
                   for line in lines)


def test_argv_command_and_stdin(mode: str, box: Path) -> None:
    res = Sandbox([box], mode=mode).run([sys.executable, "-c", "import sys; print(sys.stdin.read()[::-1])"],
                                        cwd=box, stdin="abc")
    assert res.ok, res.output
    assert res.output.strip() == "cba"


def test_output_is_read_without_epoll(box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox runs as this process's user and can use up that user's epoll watches, which no capability
    exempts (red team 8, E1: 2,746 epoll instances on one descriptor took all 5.49 M in 10 s, and every epoll
    registration of the user then failed with ENOSPC). The supervisor reads the output with poll(2)."""

    def no_watches_left(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(selectors.EpollSelector, "register", no_watches_left)
    res = Sandbox([box], mode=MODES[0]).run("echo hello", cwd=box)
    assert res.ok and res.output.strip() == "hello", res.output


def test_bad_arguments_raise(box: Path) -> None:
    with pytest.raises(SandboxError, match="does not exist"):
        Sandbox([box / "missing"])
    with pytest.raises(SandboxError, match="does not exist"):
        Sandbox([box]).run("true", cwd=box / "missing")
    with pytest.raises(SandboxError, match="unknown sandbox mode"):
        Sandbox([box], mode="chroot")  # type: ignore[arg-type]


def test_python_torch_and_cuda_gym_importable(iso_mode: str, box: Path) -> None:
    """What the judge's candidate worker needs: the installed torch and cuda_gym, read-only."""
    code = "import torch, cuda_gym, cuda_gym.sandbox; print(torch.ones(2).sum().item(), cuda_gym.__name__)"
    # Where dependencies live in a --target folder on PYTHONPATH (the GPU image), the judge passes it on.
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else None
    res = Sandbox([box], mode=iso_mode, gpu=True).run(["python3", "-c", code], cwd=box, env=env,
                                                      limits=Limits(wall_s=120))
    assert res.ok, res.output
    assert "2.0 cuda_gym" in res.output


def test_runtime_paths_under_tmp_stay_visible(iso_mode: str, box: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package may live under /tmp (a CI clone there): bwrap's empty /tmp must not hide it."""
    import shutil
    import tempfile

    from cuda_gym import sandbox as sandbox_module

    lib = Path(tempfile.mkdtemp(dir="/tmp", prefix="cuda_gym_runtime_"))
    lib.chmod(0o755)  # as library folders are: a sandbox of its own uid reads only what others may read
    (lib / "libmarker.so").write_text("visible\n")  # a library folder: one of the runtime paths the sandbox binds
    monkeypatch.setenv("LD_LIBRARY_PATH", str(lib))
    sandbox_module._runtime_paths.cache_clear()
    try:
        res = Sandbox([box], mode=iso_mode).run(["cat", str(lib / "libmarker.so")], cwd=box, limits=Limits(wall_s=30))
    finally:
        sandbox_module._runtime_paths.cache_clear()
        shutil.rmtree(lib)
    assert res.ok and res.output.strip() == "visible", res.output


# --------------------------------------------------------------------------- network


@pytest.fixture
def host_listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    accepted: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            accepted.append(conn.recv(16))
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1], accepted
    srv.close()


CONNECT = """
import socket, sys
s = socket.socket(); s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); s.sendall(b"hello"); print("CONNECTED")
except OSError as e:
    print("FAILED", e)
"""


def test_host_loopback_unreachable(iso_mode: str, box: Path, host_listener) -> None:
    port, accepted = host_listener
    res = Sandbox([box], mode=iso_mode).run(["python3", "-c", CONNECT, "127.0.0.1", str(port)], cwd=box)
    assert "FAILED" in res.output and "CONNECTED" not in res.output
    assert accepted == []
    # Control: with network=True the same listener is reached, so the probe itself works.
    res = Sandbox([box], mode=iso_mode, network=True).run(["python3", "-c", CONNECT, "127.0.0.1", str(port)],
                                                          cwd=box)
    assert "CONNECTED" in res.output, res.output


def test_outside_address_unreachable(iso_mode: str, box: Path) -> None:
    res = Sandbox([box], mode=iso_mode).run(["python3", "-c", CONNECT, "1.1.1.1", "443"], cwd=box)
    assert "FAILED" in res.output and "unreachable" in res.output.lower(), res.output
    if Path("/usr/bin/curl").exists():
        res = Sandbox([box], mode=iso_mode).run("curl -sS -m 3 https://example.com", cwd=box)
        assert res.returncode != 0


# --------------------------------------------------------------------------- filesystem


def test_writes_outside_writable_paths_fail(iso_mode: str, box: Path, tmp_path: Path) -> None:
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    protected = box / "model.py"
    protected.write_text("original\n")
    targets = [Path.home() / "cuda_gym_sandbox_probe", Path("/usr/cuda_gym_sandbox_probe"),
               Path("/etc/cuda_gym_sandbox_probe"), REPO / "cuda_gym_sandbox_probe", ro_dir / "probe",
               Path(sys.prefix) / "cuda_gym_sandbox_probe"]
    script = "; ".join(f"echo x > {t} && echo WROTE {t}" for t in targets)
    script += f"; echo changed > {protected} && echo WROTE protected; rm -f {protected} && echo WROTE rm"
    script += "; echo ok > inside && echo WROTE_INSIDE"
    res = Sandbox([box], readonly=[ro_dir, protected], mode=iso_mode).run(script, cwd=box)
    wrote = [line.split(" ", 1)[1] for line in res.output.splitlines() if line.startswith("WROTE ")]
    # The sandbox's /tmp is a private tmpfs: with the repository under /tmp (a CI clone there) the write
    # to REPO lands in it, never on the host (checked below); every other write must fail outright.
    assert [w for w in wrote if not w.startswith("/tmp/")] == [], res.output
    assert "WROTE_INSIDE" in res.output
    assert (box / "inside").read_text() == "ok\n"
    assert protected.read_text() == "original\n"
    for t in targets:
        assert not t.exists(), t


def test_read_only_mounts_cannot_be_undone(iso_mode: str, box: Path) -> None:
    """Root inside must not be able to remount the system writable (it could with capabilities left)."""
    probe = Path("/usr/cuda_gym_remount_probe")
    res = Sandbox([box], mode=iso_mode).run(
        f"grep CapEff /proc/self/status; mount -o remount,bind,rw /usr && echo REMOUNTED; "
        f"touch {probe} && echo ESCAPED; mount -t tmpfs none {box} && echo MOUNTED", cwd=box)
    assert "CapEff:\t0000000000000000" in res.output
    assert "REMOUNTED" not in res.output and "ESCAPED" not in res.output and "MOUNTED" not in res.output
    assert not probe.exists()


def test_host_kernel_and_disks_out_of_reach(iso_mode: str, box: Path) -> None:
    """uid 0 without capabilities may still write sysctls and raw disks by file mode: both are hidden."""
    res = Sandbox([box], mode=iso_mode).run(
        "v=$(cat /proc/sys/vm/overcommit_ratio) && echo $v > /proc/sys/vm/overcommit_ratio && echo SYSCTL; "
        "echo BLOCK:$(find /dev -type b | head -3):; echo hi > /dev/null && echo DEVNULL; ls /dev", cwd=box)
    assert "SYSCTL" not in res.output and "Read-only file system" in res.output
    assert "BLOCK::" in res.output and "DEVNULL" in res.output
    assert "nvidiactl" not in res.output


def test_home_not_readable(iso_mode: str, box: Path) -> None:
    secret_dir = Path.home() / ".cuda_gym_sandbox_test"
    secret_dir.mkdir(exist_ok=True)
    try:
        (secret_dir / "token").write_text("s3cret")
        res = Sandbox([box], mode=iso_mode).run(f"cat {secret_dir}/token; echo LS; ls -a {Path.home()}", cwd=box)
        assert "s3cret" not in res.output and "No such file" in res.output
        assert ".cuda_gym_sandbox_test" not in res.output.split("LS", 1)[1]
    finally:
        (secret_dir / "token").unlink()
        secret_dir.rmdir()


def test_build_tools_compile_into_writable_dir(iso_mode: str, tmp_path: Path) -> None:
    """The build's shape: sources read-only, objects into the build dir."""
    src, build = tmp_path / "ws", tmp_path / "build"
    src.mkdir()
    build.mkdir()
    (src / "k.cpp").write_text('#include <cstdio>\nint main() { std::puts("built"); }\n')
    sb = Sandbox([build], readonly=[src], mode=iso_mode)
    res = sb.run(f"g++ -O0 -o {build}/k {src}/k.cpp && {build}/k && touch {src}/x", cwd=build,
                 limits=Limits(wall_s=60))
    assert "built" in res.output
    assert res.returncode != 0 and not (src / "x").exists()
    if Path("/usr/local/cuda/bin/nvcc").exists():
        res = sb.run("nvcc --version", cwd=build)
        assert res.ok and "Cuda compilation tools" in res.output, res.output


# --------------------------------------------------------------------------- limits


def test_timeout_kills_whole_tree(mode: str, box: Path) -> None:
    marker = f"98{os.getpid() % 1000}.{ord(mode[0])}"
    res = Sandbox([box], mode=mode).run(f"sleep {marker}1 & setsid sleep {marker}2 & sleep {marker}3",
                                        cwd=box, limits=Limits(wall_s=1))
    assert res.timed_out
    assert res.reason == "killed after 1 s wall-time limit"
    assert res.seconds < 5
    if mode == "limits" and not cgroup_here():
        pytest.xfail("limits mode without a cgroup cannot catch setsid escapes")
    assert survivors(marker) == []


def test_the_out_of_memory_killer_takes_the_sandbox_first(mode: str, box: Path) -> None:
    """Every process of a sandbox, its children included, has the highest ``oom_score_adj``: memory a
    submission holds in unmapped memfds counts in no process's size, and the out-of-memory killer took the
    judge's reference worker instead (red team 7, O1)."""
    own = Path("/proc/self/oom_score_adj").read_text()
    res = Sandbox([box], mode=mode).run("cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'",
                                        cwd=box, limits=Limits(wall_s=20))
    assert res.ok and res.output.split() == [str(OOM_SCORE_ADJ)] * 2, res.output
    assert Path("/proc/self/oom_score_adj").read_text() == own  # this process's own is as it was


def test_background_processes_die_with_command(mode: str, box: Path) -> None:
    marker = f"97{os.getpid() % 1000}.{ord(mode[0])}"
    res = Sandbox([box], mode=mode).run(f"sleep {marker} & echo started", cwd=box, limits=Limits(wall_s=20))
    assert res.ok and "started" in res.output
    assert res.seconds < 5
    assert survivors(marker) == []


def test_fork_bomb_is_stopped(mode: str, box: Path) -> None:
    if os.geteuid() == 0 and not cgroup_here():
        pytest.skip("root without a pids cgroup: RLIMIT_NPROC is not enforced for uid 0")
    marker = f"cudagymbomb{mode}"
    res = Sandbox([box], mode=mode).run(f"{marker}(){{ {marker}|{marker}& }}; {marker}; sleep 2", cwd=box,
                                        limits=Limits(wall_s=10, processes=40))
    assert "process limit reached (40 processes and threads)" in res.reason, res.reason + res.output[-500:]
    assert survivors(marker) == []
    assert subprocess.run(["true"]).returncode == 0


def test_infinite_loop_stops_at_cpu_limit(mode: str, box: Path) -> None:
    """The CPU limit, not the wall limit, ends it. A sandbox runs at nice 19 (cpu.weight 1 where a cgroup can be
    made): on a busy host its 1 s of CPU took 18.6 s of wall time, so the wall limit is far."""
    res = Sandbox([box], mode=mode).run(["python3", "-c", "while True: pass"], cwd=box,
                                        limits=Limits(wall_s=120, cpu_s=1))
    assert not res.timed_out
    assert res.reason == "killed at the 1 s CPU-time limit", (res.returncode, res.output)


def test_infinite_loop_stops_at_wall_limit(mode: str, box: Path) -> None:
    res = Sandbox([box], mode=mode).run("while :; do :; done", cwd=box, limits=Limits(wall_s=1))
    assert res.timed_out and res.reason == "killed after 1 s wall-time limit"
    assert res.seconds < 5


@pytest.mark.parametrize("gpu", [False, True], ids=["as", "data"])
def test_huge_allocation_fails_with_memory_reason(mode: str, box: Path, gpu: bool) -> None:
    res = Sandbox([box], mode=mode, gpu=gpu).run(["python3", "-c", "b = bytearray(100 * 2**30); print('ALLOC')"],
                                                 cwd=box, limits=Limits(memory_bytes=1 * GiB))
    assert res.returncode != 0 and "ALLOC" not in res.output
    assert res.reason == "memory limit of 1 GiB exceeded", res.output


def test_huge_file_is_stopped_by_file_limit(mode: str, box: Path) -> None:
    limits = Limits(file_bytes=10 * 2**20)
    sb = Sandbox([box], mode=mode)
    res = sb.run("head -c 10G /dev/zero > big", cwd=box, limits=limits)
    assert res.reason == "file size limit exceeded (files are capped at 10 MiB)", (res.returncode, res.output)
    assert (box / "big").stat().st_size <= 10 * 2**20
    res = sb.run(["python3", "-c", "f = open('big2', 'wb')\nfor _ in range(10240): f.write(bytes(2**20))"], cwd=box,
                 limits=limits)
    assert "file size limit exceeded" in res.reason
    assert (box / "big2").stat().st_size <= 10 * 2**20


def test_limits_without_prlimit_binary(box: Path) -> None:
    """Where util-linux's prlimit is missing, limits are set in the child before exec."""
    sb = Sandbox([box], mode="limits")
    sb._prlimit = None
    res = sb.run("head -c 10G /dev/zero > big", cwd=box, limits=Limits(file_bytes=2**20))
    assert res.reason == "file size limit exceeded (files are capped at 1 MiB)"
    assert (box / "big").stat().st_size <= 2**20


def test_output_is_capped_head_and_tail(mode: str, box: Path) -> None:
    cmd = "echo FIRST; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo LAST"
    res = Sandbox([box], mode=mode).run(cmd, cwd=box, limits=Limits(output_bytes=100_000))
    assert res.ok and res.output_truncated
    assert res.output.startswith("FIRST") and res.output.rstrip().endswith("LAST")
    assert len(res.output) < 101_000


def test_endless_output_is_bounded(mode: str, box: Path) -> None:
    res = Sandbox([box], mode=mode).run("yes spam", cwd=box, limits=Limits(wall_s=1, output_bytes=50_000))
    assert res.timed_out and res.output_truncated
    assert len(res.output) < 51_000


def test_non_utf8_output_is_replaced(mode: str, box: Path) -> None:
    res = Sandbox([box], mode=mode).run("printf 'a\\xff\\xfeb'", cwd=box)
    assert res.output == "a\ufffd\ufffdb"


@pytest.mark.gpu
def test_gpu_visible_in_gpu_sandbox(box: Path) -> None:
    code = "import torch; x = torch.ones(4, device='cuda'); print('SUM', (x * 2).sum().item())"
    res = Sandbox([box], gpu=True).run(["python3", "-c", code], cwd=box, limits=Limits(wall_s=120))
    assert res.ok, res.output
    assert "SUM 8.0" in res.output
    res = Sandbox([box], gpu=False).run(["python3", "-c", "import torch; print(torch.cuda.is_available())"],
                                        cwd=box, limits=Limits(wall_s=120))
    if sandbox_mode() == "bwrap":
        assert "False" in res.output
