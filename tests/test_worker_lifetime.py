"""A reference worker dies with the process that started it, also in the middle of a request
(``cuda_gym.sandbox.die_with_parent``): on the H100 on 2026-12-05 the workers of a killed ``Judge`` went on
timing, pinned to a timing lane's CPU, beside the next judge's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# Reference code that keeps the worker busy in ``Prepare``: it reads no more requests (nor sees its input
# pipe close) until this returns.
SLEEPY_TASK = textwrap.dedent(
    """
    import time
    import torch

    class Model(torch.nn.Module):
        def forward(self, x):
            return x

    def get_inputs():
        return [torch.ones(4)]

    def get_init_inputs():
        time.sleep(300)
        return []
    """
)

ORCHESTRATOR = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from cuda_gym.judge import Judge
    from cuda_gym.tasks import Task

    root = Path(sys.argv[1])
    task = Task(id="custom/sleepy", source="custom", level=1, name="sleepy", code=(root / "task.py").read_text())
    Judge({"device": "cpu", "cache_dir": str(root / "cache")}).prewarm_compile([task], jobs=1)
    """
)


def _workers_of(parent: int, marker: bytes = b"cuda_gym.judge.reference_worker") -> list[int]:
    """Live processes whose parent is ``parent`` and whose command line holds ``marker`` (from ``/proc``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == parent and marker in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


VALIDATOR = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from cuda_gym.tasks import Task
    from cuda_gym.tasks.validate import ValidationConfig, validate_tasks

    root = Path(sys.argv[1])
    task = Task(id="custom/sleepy", source="custom", level=1, name="sleepy", code=(root / "task.py").read_text())
    validate_tasks([task], ValidationConfig(device="cpu", rules="eager", jobs=1, timeout_s=600))
    """
)


@pytest.mark.parametrize(("script", "marker"), [(ORCHESTRATOR, b"cuda_gym.judge.reference_worker"),
                                                (VALIDATOR, b"multiprocessing")], ids=["judge", "validation"])
def test_a_busy_helper_dies_when_its_orchestrator_is_killed(tmp_path: Path, script: str, marker: bytes) -> None:
    """A judge's reference worker and a task validation's worker, each busy in the reference's
    ``get_init_inputs``, die when the process that started them is killed."""
    (tmp_path / "task.py").write_text(SLEEPY_TASK)
    orchestrator = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], env=dict(os.environ))
    try:
        until = time.monotonic() + 120
        workers: list[int] = []
        while not workers and time.monotonic() < until and orchestrator.poll() is None:
            time.sleep(0.2)
            workers = _workers_of(orchestrator.pid, marker)
        assert workers, "the orchestrator started no worker"
        time.sleep(6.0)  # well into the task: the reference's get_init_inputs sleeps 300 s
        assert all(_alive(pid) for pid in workers)
    finally:
        orchestrator.kill()
        orchestrator.wait()
    until = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < until:
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, 9)
    assert not left, f"worker(s) {left} outlived their orchestrator"


TIED_AT_EXIT = textwrap.dedent(
    """
    import atexit
    import time
    from cuda_gym.sandbox import killed_with_this_process, spawn

    child = spawn(killed_with_this_process(["sleep", "100"]))
    print(child.pid, flush=True)
    atexit.register(lambda: time.sleep(0.5) or print("alive at exit:", child.poll() is None, flush=True))
    """
)


def test_a_tied_child_lives_until_its_process_ends_and_no_longer() -> None:
    """The spawner is a daemon thread: a ``ThreadPoolExecutor``'s was joined when the main thread returned,
    before ``atexit`` handlers ran, and its parent-death signal killed every tied child (reference workers
    finishing an executor's queue at exit) while the process still ran."""
    out = subprocess.run([sys.executable, "-c", TIED_AT_EXIT], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    pid_line, alive_line = out.stdout.strip().splitlines()
    assert alive_line == "alive at exit: True"
    child = int(pid_line)
    until = time.monotonic() + 10
    while _alive(child) and time.monotonic() < until:
        time.sleep(0.05)
    if _alive(child):
        os.kill(child, 9)
        raise AssertionError("the tied child outlived its process")
