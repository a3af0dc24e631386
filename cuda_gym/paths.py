"""Where cuda_gym finds data and keeps caches: one lookup order used everywhere."""

from __future__ import annotations

import os
from pathlib import Path

DATA_ENV = "CUDA_GYM_DATA_DIR"
CACHE_ENV = "CUDA_GYM_CACHE_DIR"


def cache_dir() -> Path:
    """The user cache (``$CUDA_GYM_CACHE_DIR``, else ``$XDG_CACHE_HOME/cuda_gym``, else ``~/.cache/cuda_gym``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "cuda_gym"


def data_roots(explicit: str | os.PathLike[str] | None = None) -> list[Path]:
    """Candidate data roots in lookup order: an explicit path, then ``$CUDA_GYM_DATA_DIR``, then the cache.

    Each root holds one folder per data set (``kernelbench/``, ``ops6k/``).
    """
    roots: list[Path] = []
    if explicit is not None:
        roots.append(Path(explicit).expanduser())
    if os.environ.get(DATA_ENV):
        roots.append(Path(os.environ[DATA_ENV]).expanduser())
    roots.append(cache_dir() / "data")
    return roots
