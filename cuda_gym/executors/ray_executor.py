"""RayExecutor: the same judge jobs on a Ray cluster, one GPU actor per device (optional extra ``cuda-gym[ray]``)."""

from __future__ import annotations

import collections
import logging
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_gym.errors import ConfigError, JudgeError
from cuda_gym.executors.base import Executor
from cuda_gym.executors.job import JudgeJob
from cuda_gym.judge import JudgeConfig
from cuda_gym.judge.result import JudgeResult
from cuda_gym.trees import remove_tree

log = logging.getLogger(__name__)

ACTOR_COOLDOWN_S = 2.0
"""After its actor failed, a job goes to another actor; the failed one is pinged again after this."""
NO_ACTOR_TIMEOUT_S = 120.0
"""Queued jobs fail when no actor has answered for this long (every actor dead, no GPU left to restart on)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("executor='ray' needs Ray: pip install 'cuda-gym[ray]'") from exc
    return ray


class JudgeActor:
    """One device of the cluster: a one-lane ``LocalGPUPool`` (its builds run in the actor's CPU threads,
    ahead of its timing), judging packed jobs unpacked into a folder of the actor's node."""

    def __init__(self, judge: JudgeConfig, warm_servers: int) -> None:
        from cuda_gym.executors.pool import LocalGPUPool

        device = "cuda:0" if judge.is_cuda else "cpu"  # Ray gives the actor its GPU as device 0
        self.pool = LocalGPUPool(judge, devices=[device], warm_servers=warm_servers)

    def ping(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def evaluate(self, job: JudgeJob) -> JudgeResult:
        folder = Path(tempfile.mkdtemp(prefix="cuda_gym_ray_job_"))
        try:
            return self.pool.evaluate(job.unpack(folder / "workspace"))
        finally:
            remove_tree(folder)


@dataclass
class _Work:
    job: JudgeJob
    future: Future[JudgeResult]
    attempts: int = 0


class _Actor:
    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.in_flight = 0
        self.failed_at = 0.0
        self.probe: Any = None


class RayExecutor(Executor):
    """Judge jobs on a Ray cluster: one actor per GPU (``num_gpus=1``), restarted on failure.

    Args:
        judge: a ``JudgeConfig`` (or a dict of its fields); each actor judges on its own GPU (``cpu``
            actors on a cluster whose nodes declare GPUs as resources: CI).
        address: the cluster (``ray.init(address=...)``); ``None`` joins the running one or starts a local one.
        devices: how many actors (their number only); ``None``: one per GPU of the cluster.
        max_in_flight: jobs handed to the actors at once (back-pressure; the rest wait here);
            ``None``: 2 per actor (one timing, one building ahead).
        max_restarts: Ray restarts of an actor that died (``max_restarts`` of the actor).
        job_retries: how often a job whose actor or node died is submitted again (to another actor)
            before its future fails with a ``JudgeError`` saying so.
        warm_servers: warm candidate servers per actor.

    Jobs are packed (``JudgeJob.pack``: the submission's bytes travel, not its path). A job is never
    silently lost: its future gets the result, the judge's ``JudgeError``, or a ``JudgeError`` naming
    the actor failure after ``job_retries`` resubmissions.
    """

    kind = "ray"

    def __init__(
        self,
        judge: JudgeConfig | dict[str, Any] | None = None,
        *,
        address: str | None = None,
        devices: Sequence[str] | None = None,
        max_in_flight: int | None = None,
        max_restarts: int = 3,
        job_retries: int = 1,
        warm_servers: int = 2,
    ) -> None:
        ray = _ray()
        self.config = JudgeConfig.from_dict(judge)
        self.device_flavour = "cuda" if self.config.is_cuda else "cpu"
        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        count = len(devices) if devices is not None else int(ray.cluster_resources().get("GPU", 0))
        if count < 1:
            raise ConfigError(
                "the Ray cluster has no GPU resources: start nodes with GPUs (or --num-gpus), or pass devices="
            )
        per_actor = 2
        remote = ray.remote(num_gpus=1, num_cpus=1, max_restarts=max_restarts, max_concurrency=per_actor + 1)(JudgeActor)
        self.actors = [_Actor(remote.remote(self.config, warm_servers)) for _ in range(count)]
        self.max_in_flight = max_in_flight or per_actor * count
        self.job_retries = job_retries
        self._queue: collections.deque[_Work] = collections.deque()
        self._running: dict[Any, tuple[_Work, _Actor]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._last_alive = time.monotonic()
        self._thread = threading.Thread(target=self._dispatch, name="cuda-gym-ray-dispatch", daemon=True)
        self._thread.start()

    def submit(self, job: JudgeJob) -> Future[JudgeResult]:
        """Pack ``job`` and queue it for an actor."""
        future: Future[JudgeResult] = Future()
        work = _Work(job.pack(), future)
        with self._cond:
            if self._closed:
                raise JudgeError("this RayExecutor is closed")
            self._queue.append(work)
            self._cond.notify()
        return future

    # ------------------------------------------------------------------ dispatch

    def _pick(self) -> _Actor | None:
        now = time.monotonic()
        healthy = [a for a in self.actors if not a.failed_at and a.in_flight < self.max_in_flight]
        if healthy:
            return min(healthy, key=lambda a: a.in_flight)
        for actor in self.actors:  # probe actors that failed a while ago (a restart may have brought them back)
            if actor.failed_at and actor.probe is None and now - actor.failed_at > ACTOR_COOLDOWN_S:
                actor.probe = actor.handle.ping.remote()
        return None

    def _dispatch(self) -> None:
        ray = _ray()
        while True:
            with self._cond:
                while len(self._running) < self.max_in_flight and self._queue:
                    actor = self._pick()
                    if actor is None:
                        break
                    work = self._queue.popleft()
                    if not work.attempts and not work.future.set_running_or_notify_cancel():
                        continue  # cancelled while queued
                    work.attempts += 1
                    ref = actor.handle.evaluate.remote(work.job)
                    actor.in_flight += 1
                    self._running[ref] = (work, actor)
                if self._closed and not self._queue and not self._running:
                    return
                refs = list(self._running)
                probes = {a.probe: a for a in self.actors if a.probe is not None}
            self._settle_probes(ray, probes)
            if not refs:
                self._fail_if_stranded()
                with self._cond:
                    self._cond.wait(timeout=0.5)
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.5)
            for ref in ready:
                self._settle(ray, ref)
            self._fail_if_stranded()

    def _settle(self, ray: Any, ref: Any) -> None:
        with self._cond:
            work, actor = self._running.pop(ref)
            actor.in_flight -= 1
        try:
            result = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(getattr(exc, "cause", None), Exception) else JudgeError(str(exc)[:2000])
            work.future.set_exception(cause)
            return
        except ray.exceptions.RayError as exc:  # actor, node or object lost, OOM-killed, cancelled, unschedulable
            actor.failed_at = time.monotonic()
            if work.attempts <= self.job_retries:
                log.warning("a judge actor failed (%s); resubmitting the job", type(exc).__name__)
                with self._cond:
                    self._queue.appendleft(work)
                return
            work.future.set_exception(
                JudgeError(
                    f"the Ray actor judging this job died {work.attempts} time(s) ({type(exc).__name__}: "
                    f"{str(exc)[:300]}); the job was not judged: submit it again"
                )
            )
            return
        except Exception as exc:  # noqa: BLE001 - a future must never be left unresolved
            work.future.set_exception(JudgeError(f"the Ray executor could not get this job's result: {exc}"[:2000]))
            return
        work.future.set_result(result)

    def _settle_probes(self, ray: Any, probes: dict[Any, _Actor]) -> None:
        if not probes:
            return
        ready, _ = ray.wait(list(probes), num_returns=len(probes), timeout=0)
        for ref in ready:
            actor = probes[ref]
            actor.probe = None
            try:
                ray.get(ref)
            except ray.exceptions.RayError:
                actor.failed_at = time.monotonic()
                continue
            actor.failed_at = 0.0

    def _fail_if_stranded(self) -> None:
        now = time.monotonic()
        with self._cond:
            if self._running or any(not a.failed_at for a in self.actors):
                self._last_alive = now
                return
            if not self._queue or now - self._last_alive < NO_ACTOR_TIMEOUT_S:
                return
            stranded = list(self._queue)
            self._queue.clear()
        for work in stranded:
            work.future.set_exception(
                JudgeError(f"no Ray judge actor answered for {NO_ACTOR_TIMEOUT_S:.0f} s: every actor is dead or unschedulable")
            )

    def close(self, cancel: bool = False) -> None:
        """Stop accepting jobs, finish (or with ``cancel`` cancel) the queued ones, then kill the actors."""
        with self._cond:
            self._closed = True
            if cancel:
                for work in self._queue:
                    work.future.cancel()
                self._queue.clear()
            self._cond.notify()
        self._thread.join()
        ray = _ray()
        for actor in self.actors:
            try:
                ray.kill(actor.handle)
            except Exception:  # noqa: BLE001 - already gone
                pass
