"""The executor interface: submit a judge job, get a future of its ``JudgeResult``; close."""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from cuda_gym.executors.job import JudgeJob
from cuda_gym.judge.result import JudgeResult

log = logging.getLogger(__name__)


class Executor(abc.ABC):
    """Where judge jobs run.

    ``submit(job)`` returns at once with a ``concurrent.futures.Future`` whose result is the job's
    ``JudgeResult`` (a candidate's failure is in the result; an infrastructure failure is the future's
    ``JudgeError``). Every submitted job's future is resolved: with a result, an exception, or
    cancellation by ``close(cancel=True)``. ``close()`` waits for the jobs in flight and stops the
    workers; executors are context managers (leaving the block on an exception cancels the queued
    jobs). Subclasses implement ``submit`` and ``close``.
    """

    kind: str = ""
    """``inline``, ``local``, ``ray`` or ``client`` (a process using another process's pool)."""

    device_flavour: str = "cuda"
    """``cuda`` or ``cpu``: what the executor's devices judge."""

    @abc.abstractmethod
    def submit(self, job: JudgeJob) -> Future[JudgeResult]:
        """Queue ``job``; a future of its result."""

    @abc.abstractmethod
    def close(self, cancel: bool = False) -> None:
        """Stop accepting jobs; finish those in flight (``cancel=True``: cancel those not started)."""

    def evaluate(self, job: JudgeJob) -> JudgeResult:
        """``submit(job).result()``."""
        return self.submit(job).result()

    def map(self, jobs: Iterable[JudgeJob]) -> list[JudgeResult]:
        """Submit every job, then wait for all; results in the order of ``jobs``."""
        futures = [self.submit(job) for job in jobs]
        return [f.result() for f in futures]

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(cancel=exc_type is not None)  # leaving on an error (Ctrl-C): queued jobs are cancelled


def done_future(fn: Any, *args: Any, **kwargs: Any) -> Future[Any]:
    """A future holding ``fn(*args, **kwargs)`` or the exception it raised (run now, in this thread)."""
    future: Future[Any] = Future()
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - the caller sees it through the future
        future.set_exception(exc)
    return future


@contextlib.contextmanager
def opened(job: JudgeJob, flavour: str) -> Iterator[dict[str, Any]]:
    """``Judge.prepare`` keywords of ``job``: its workspace opened (with its build folder) and closed after."""
    if job.solution is not None:
        yield {"solution": job.solution, "mode": job.mode}
        return
    from cuda_gym.workspace import Workspace

    assert job.workspace is not None
    ws = Workspace.open(Path(job.workspace), job.resolved_task(), flavour, build_dir=job.build_dir)
    try:
        yield {"workspace": ws, "mode": job.mode}
    finally:
        ws.close()
