"""Warm servers (``cuda_gym.judge.reference_worker.WarmServers``): started ahead, paused while the driver measures."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

from cuda_gym.judge.driver import ServerSession, ServerSpec
from cuda_gym.judge.reference_worker import WarmServers, _Warm
from cuda_gym.paths import package_pythonpath
from cuda_gym.process_stop import tree
from cuda_gym.sandbox import Limits


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_server_refilled_just_before_is_paused_for_the_whole_block(tmp_path: Path) -> None:
    """``refill`` starts a server's boot thread and the driver calibrates at once: ``quiet`` must pause that
    server too, though its process appears only some milliseconds later (it saw no process and let the
    server import torch through the calibration, the subtracted overhead)."""
    driver = SimpleNamespace(sessions=None, quiet=None, segments=None)
    warm_servers = WarmServers(driver, 1)  # type: ignore[arg-type]
    spec = ServerSpec(device="cpu", job_dir=tmp_path, cache_root=tmp_path / "cache", writable=[tmp_path],
                      env={"PYTHONPATH": package_pythonpath()},
                      limits=Limits(wall_s=120.0))
    warm = _Warm(ServerSession(spec), tmp_path / "slot").launch(None)
    warm_servers.stock.append(warm)
    try:
        with warm_servers.quiet():  # at once, as Driver._open after refill
            proc = warm.session.proc
            assert proc is not None, "quiet returned before the booting server had a process"
            time.sleep(0.3)
            members = tree(proc.pid)
            assert members and all(_state(pid) == "T" for pid in members), [(pid, _state(pid)) for pid in members]
        assert warm.ready(), warm.error  # resumed: it finishes booting
    finally:
        warm_servers.close()
