"""The on-disk cache of reference timings (eager and ``torch.compile``) per task, device, torch and dtype, and
the inductor cache that the ``torch.compile`` baselines share (``inductor_cache``)."""

from __future__ import annotations

import fcntl
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cuda_gym.paths import write_text_atomic

log = logging.getLogger(__name__)


def _component(text: str) -> str:
    """A path component from free text (GPU names have spaces; torch versions have ``+``)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "unknown"


class BaselineCache:
    """``<root>/<task code_hash>/<device name>/<torch version>/<dtype>.json``, written atomically under a lock.

    Each entry holds ``eager`` and ``compile`` timings (``Timing`` fields, or ``None`` when
    ``torch.compile`` failed, with its ``compile_error``), the harness settings and the fingerprint.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, code_hash: str, device_name: str, torch_version: str, dtype: str) -> Path:
        """Where the entry for these keys lives."""
        return self.root / code_hash / _component(device_name) / _component(torch_version) / f"{_component(dtype)}.json"

    def get(self, path: Path) -> dict[str, Any] | None:
        """The entry at ``path``, or ``None`` when absent or unreadable (a broken entry is remeasured)."""
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable baseline cache entry %s: %s", path, exc)
            return None
        return data if isinstance(data, dict) and "eager" in data else None

    def put(self, path: Path, data: dict[str, Any]) -> None:
        """Store ``data`` at ``path`` atomically."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True))

    @contextmanager
    def lock(self, path: Path) -> Iterator[None]:
        """Hold an exclusive lock for ``path`` (so concurrent judges measure each baseline once)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(path.name + ".lock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)


def inductor_cache(cache_root: Path) -> Path:
    """The inductor cache (``TORCHINDUCTOR_CACHE_DIR``: FX graphs, AOT artifacts, Triton kernels) under the
    judge's cache root, made if missing. Only the ``torch.compile`` baseline servers bind it (writable):
    they run the task's reference code, never a submission, so nothing an agent writes reaches it. A
    task's compile baseline measured again (noisy, another device's lane, a new judge) loads its graphs."""
    path = Path(cache_root) / "inductor"
    path.mkdir(parents=True, exist_ok=True)
    return path
