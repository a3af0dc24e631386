"""Shared fixtures and the ``gpu`` marker: GPU tests are skipped where no CUDA device is visible."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cuda_gym.workspace import Workspace

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "datasets"


def _pin_worker_gpu() -> None:
    """Under pytest-xdist with ``CUDA_GYM_TEST_GPUS=0,1``, give worker ``gwN`` GPU ``N mod count`` alone.

    KernelBench level-1 evaluations take 6-12 GiB per output: workers sharing one GPU run out of
    memory. Runs before torch initialises CUDA (this module is imported first in every worker), and
    the judge's worker processes inherit the setting.
    """
    gpus = [g for g in os.environ.get("CUDA_GYM_TEST_GPUS", "").split(",") if g.strip()]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if gpus and worker.startswith("gw") and worker[2:].isdigit():
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[int(worker[2:]) % len(gpus)].strip()


_pin_worker_gpu()
# GPU tests that run a candidate server's driver in this process (``ServerSession``) need CUDA's modules
# loaded eagerly (``cuda_gym.judge.transport.modules_load_eagerly``); set before torch starts CUDA.
os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")


def _has_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch import failure is reported by other tests
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the lent H200: see docs/development.md)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The build fixtures are defined here once: a module importing them would get its own copies of the
# session fixtures (its own build cache), and every extension would compile once per module.
from build_fixtures import build_cache, build_config, cpu_add_build, cuda_add_build  # noqa: E402,F401


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The data root holding ``kernelbench/`` and ``ops6k/`` (``CUDA_GYM_DATA_DIR`` or ../shared/datasets)."""
    env = os.environ.get("CUDA_GYM_DATA_DIR")
    root = Path(env) if env else SHARED_DATA
    if not (root / "kernelbench").is_dir():
        pytest.skip(f"no data sets at {root}: set CUDA_GYM_DATA_DIR to a folder with kernelbench/ and ops6k/")
    return root


@pytest.fixture(scope="session")
def judges() -> Iterator[Any]:
    """Judges shared by the adversarial and solution tests (``adversarial.judging.SharedJudges``)."""
    from adversarial.judging import SharedJudges

    shared = SharedJudges()
    yield shared
    shared.close()


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """A fresh CPU workspace for ``builtin/fused_bias_gelu`` (a module's own ``ws`` fixture overrides this one)."""
    from cuda_gym.tasks import get_task
    from cuda_gym.workspace import Workspace

    workspace = Workspace.create(get_task("builtin/fused_bias_gelu"), flavour="cpu", parent=tmp_path)
    yield workspace
    workspace.close()


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """An empty writable folder for a sandboxed command (the sandbox tests' working directory)."""
    work = tmp_path / "work"
    work.mkdir()
    return work
