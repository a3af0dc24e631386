"""LocalGPUPool: one timing lane per GPU of this machine, builds ahead on the CPU, warm single-use servers."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from cuda_gym.errors import ConfigError, JudgeError
from cuda_gym.executors.base import Executor, opened
from cuda_gym.executors.job import JudgeJob
from cuda_gym.judge import Judge, JudgeConfig
from cuda_gym.judge.judge import PreparedJob
from cuda_gym.judge.result import JudgeResult
from cuda_gym.vocab import check_device, indexed_device

log = logging.getLogger(__name__)


def visible_gpus() -> list[str]:
    """``cuda:N`` for every GPU this process sees (NVML's count: no CUDA context is made here)."""
    import torch

    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


@dataclass
class _Ticket:
    """A built job waiting for a lane."""

    job: JudgeJob
    prepared: PreparedJob
    future: Future[JudgeResult]


class _Lane:
    """One device, one ``Judge`` (one reference worker and its warm servers), one job at a time."""

    def __init__(self, index: int, config: JudgeConfig, jobs: queue.Queue[_Ticket | None]) -> None:
        self.index = index
        self.device = config.device
        self.judge = Judge(config)
        self.jobs = jobs
        self.current: _Ticket | None = None
        self.done = 0
        self.thread = threading.Thread(target=self._loop, name=f"cuda-gym-lane-{index}-{self.device}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            ticket = self.jobs.get()
            if ticket is None:
                return
            self.current = ticket
            try:
                if not ticket.future.set_running_or_notify_cancel():
                    self.judge.discard(ticket.prepared)
                    continue
                ticket.prepared.result.device = self.device
                try:
                    result = self.judge.finish(ticket.prepared)
                except BaseException as exc:  # noqa: BLE001 - a lane never dies; the job's future says why
                    ticket.future.set_exception(_lane_failure(exc, self.device))
                else:
                    ticket.future.set_result(result)
                self.done += 1
            finally:
                self.current = None

    def worker_pid(self) -> int | None:
        """The pid of the lane's reference worker (``None`` before its first job or after a fault)."""
        return self.judge.worker_pid

    def close(self) -> None:
        self.judge.close()


def _lane_failure(exc: BaseException, device: str) -> BaseException:
    if isinstance(exc, JudgeError):
        return exc
    return JudgeError(f"the judge lane of {device} failed: {type(exc).__name__}: {exc}")


class LocalGPUPool(Executor):
    """Judge jobs on every GPU of this machine: one timing lane per device, builds ahead on the CPU.

    Args:
        judge: a ``JudgeConfig`` (or a dict of its fields) for every lane; its ``device`` picks CUDA or
            CPU lanes, each lane gets its own device.
        devices: the lanes' devices; ``None``: every visible GPU (``lanes`` CPU lanes if the judge's
            device is ``cpu``).
        lanes: CPU lanes when ``devices`` is ``None`` and the device is ``cpu`` (default 1: CPU lanes share
            the machine's cores, so more than one times jobs against each other; for exercising the pool).
        warm_servers: candidate servers each lane keeps started ahead (0: a fresh one per job).
        build_workers: threads building submissions ahead of timing (``None``: the CPU count).

    How a job runs: a build thread runs ``Judge.prepare`` (the judgement cache, static rules, the
    sandboxed build; a cached verdict or a failed build resolves the future right there), then the
    job waits in one FIFO queue for the next free lane, whose ``Judge.finish`` runs the trusted driver
    on a warm candidate server. A lane times one job at a time, so timings never overlap on a
    device. A candidate that crashes, faults the GPU or hangs is killed by the driver (the per-call
    bound ``JudgeConfig.call_timeout_s``) and its result says why; a reference worker that dies or
    stops answering is killed and started again (``JudgeConfig.reference_timeout_s``), the request is
    retried once and otherwise the job's future holds the ``JudgeError``. Judgement-cache keys use the
    first lane's device: lanes of one pool are meant to be GPUs of one model.
    """

    kind = "local"

    def __init__(
        self,
        judge: JudgeConfig | dict[str, Any] | None = None,
        *,
        devices: Sequence[str] | None = None,
        lanes: int = 1,
        warm_servers: int = 2,
        build_workers: int | None = None,
    ) -> None:
        base = JudgeConfig.from_dict(judge)
        if devices is None:
            devices = [base.device] * lanes if not base.is_cuda else visible_gpus()
            if not devices:
                raise ConfigError(
                    "no GPU is visible for a local pool: check CUDA_VISIBLE_DEVICES, or judge on the CPU "
                    "with device='cpu'"
                )
        devices = [indexed_device(check_device(d, "a pool device")) for d in devices]
        if len(set(devices)) != len(devices) and any(d.startswith("cuda") for d in devices):
            raise ConfigError(f"a local pool's devices must be distinct GPUs (one timing lane each), got {devices}")
        if len({d == "cpu" for d in devices}) != 1 or (devices[0] == "cpu") == base.is_cuda:
            raise ConfigError(f"the pool's devices {devices} do not match the judge's device {base.device!r}")
        self.devices = list(devices)
        self.device_flavour = "cuda" if base.is_cuda else "cpu"
        self.config = replace(base, device=self.devices[0], warm_servers=warm_servers)
        self._builder = Judge(self.config)  # prepares only: its reference worker never starts
        self._jobs: queue.Queue[_Ticket | None] = queue.Queue()
        self.lanes = [
            _Lane(i, replace(self.config, device=d), self._jobs) for i, d in enumerate(self.devices)
        ]
        workers = build_workers or max(1, os.cpu_count() or 1)
        self._builds = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cuda-gym-build")
        self._closed = False
        self._lock = threading.Lock()
        self._pending: set[Future[JudgeResult]] = set()

    def submit(self, job: JudgeJob) -> Future[JudgeResult]:
        """Queue ``job`` for its build, then for a lane."""
        with self._lock:
            if self._closed:
                raise JudgeError("this LocalGPUPool is closed: make a new one (or use the shared one)")
            future: Future[JudgeResult] = Future()
            self._pending.add(future)
        future.add_done_callback(self._forget)
        self._builds.submit(self._build, job, future)
        return future

    def _forget(self, future: Future[JudgeResult]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _build(self, job: JudgeJob, future: Future[JudgeResult]) -> None:
        if future.cancelled():
            return
        try:
            with opened(job, self.device_flavour) as kwargs:
                prepared = self._builder.prepare(job.resolved_task(), **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the future says why
            if future.set_running_or_notify_cancel():
                future.set_exception(exc if isinstance(exc, Exception) else JudgeError(str(exc)))
            return
        if prepared.done:
            if future.set_running_or_notify_cancel():
                future.set_result(prepared.result)
            return
        self._jobs.put(_Ticket(job, prepared, future))

    @property
    def queued(self) -> int:
        """Built jobs waiting for a lane."""
        return self._jobs.qsize()

    def close(self, cancel: bool = False) -> None:
        """Stop accepting jobs; finish the queued ones (``cancel=True``: cancel those not yet on a lane),
        then stop every lane's reference worker and warm servers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = list(self._pending)
        if cancel:
            for future in pending:
                future.cancel()
        self._builds.shutdown(wait=True)
        for _ in self.lanes:
            self._jobs.put(None)
        for lane in self.lanes:
            lane.thread.join()
            lane.close()
        self._builder.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close(cancel=True)
        except Exception:  # noqa: BLE001
            pass
