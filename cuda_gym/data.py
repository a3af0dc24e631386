"""Downloading the task data sets (KernelBench, CUDA-Agent-Ops-6K) into the cache."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cuda_gym.errors import DataNotFoundError, TaskError
from cuda_gym.paths import DATA_ENV, cache_dir
from cuda_gym.tasks.loaders import HF_REPOS

logger = logging.getLogger(__name__)

DATASETS = tuple(HF_REPOS)
"""The data sets ``fetch`` knows (``kernelbench``, ``ops6k``)."""


def _offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _offline_error(name: str, dest: Path, why: str) -> DataNotFoundError:
    return DataNotFoundError(
        f"cannot download {name} ({HF_REPOS[name]} on the Hugging Face hub): {why}. Run "
        f"`cuda-gym data fetch {name}` on a machine with network access, or copy the data set into "
        f"{dest} (or any folder F with F/{name}/, then set ${DATA_ENV}=F or pass --path F)"
    )


def _write_level_folders(dest: Path) -> int:
    """Write KernelBench's parquet rows as ``levelN/<name>.py`` files (as in the GitHub repo)."""
    import pyarrow.parquet as pq

    count = 0
    for file in sorted(dest.rglob("level_*.parquet")):
        for rec in pq.read_table(file).to_pylist():
            folder = dest / f"level{int(rec['level'])}"
            folder.mkdir(exist_ok=True)
            name = str(rec["name"]).removesuffix(".py")
            (folder / f"{name}.py").write_text(rec["code"], encoding="utf-8")
            count += 1
    return count


def fetch(name: str, dest: str | os.PathLike[str] | None = None) -> Path:
    """Download data set ``name`` into ``dest`` (default ``cache_dir()/data/<name>``) and return it.

    KernelBench arrives as the hub's parquet files plus ``levelN/*.py`` folders written from them;
    Ops-6K as its parquet file. Offline (no network, or ``HF_HUB_OFFLINE=1``) this raises
    ``DataNotFoundError`` saying where to put a copy instead.
    """
    if name not in HF_REPOS:
        raise TaskError(f"unknown data set {name!r}; choose one of {', '.join(DATASETS)}")
    target = Path(dest).expanduser() if dest is not None else cache_dir() / "data" / name
    if _offline():
        raise _offline_error(name, target, "HF_HUB_OFFLINE is set")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise _offline_error(name, target, "huggingface_hub is not installed (pip install 'cuda-gym[data]')") from None
    target.mkdir(parents=True, exist_ok=True)
    logger.info("downloading %s into %s", HF_REPOS[name], target)
    try:
        snapshot_download(
            repo_id=HF_REPOS[name],
            repo_type="dataset",
            local_dir=str(target),
            allow_patterns=["*.parquet", "*.jsonl", "README.md"],
        )
    except Exception as exc:  # the hub client raises many types for a missing network
        raise _offline_error(name, target, f"{type(exc).__name__}: {exc}") from exc
    if name == "kernelbench":
        try:
            written = _write_level_folders(target)
        except ImportError:
            logger.warning("pyarrow is missing: KernelBench stays as parquet files in %s", target)
        else:
            logger.info("wrote %d KernelBench task files under %s/level*/", written, target)
    return target
