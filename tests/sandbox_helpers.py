"""Helpers shared by the sandbox tests: finding processes that survived a sandbox."""

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
