"""Where cuda_gym finds data and keeps caches: one lookup order used everywhere."""

from __future__ import annotations

import contextlib
import os
import threading
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


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    Readers see the old file or the new one, never a partial write. The temporary name
    (``.<name>.<pid>.<thread>.tmp``) is unique per writer, so concurrent writers of the same path
    (processes or threads) never share one; the last ``os.replace`` wins.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def package_pythonpath() -> str:
    """``PYTHONPATH`` for a process of ours (judge workers, candidate servers, the load_inline recorder):
    the folder ``cuda_gym`` was imported from, then this process's own entries (dependencies installed
    with ``pip --target``, as on the GPU image)."""
    import cuda_gym

    root = str(Path(cuda_gym.__file__).resolve().parent.parent)
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return os.pathsep.join([root, *rest])
