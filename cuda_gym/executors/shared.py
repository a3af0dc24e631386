"""One executor per process tree: a process-wide registry, and a Unix-socket server for subprocesses.

``shared_executor(config, judge)`` returns the process's pool for these settings, making it on first
use. The process that makes a ``local`` pool also serves it over a ``multiprocessing.managers``
server on a Unix socket in a private (0700) folder, and exports its address and a random key in
``CUDA_GYM_EXECUTOR_ADDRESS`` / ``CUDA_GYM_EXECUTOR_AUTHKEY``: subprocesses started afterwards (a
``gymnasium`` ``AsyncVectorEnv``'s workers, forked or spawned) inherit them and get a ``PoolClient``,
so N environments in N processes share one lane per GPU instead of making N pools whose timings
overlap. The pool lives until ``shutdown_executors()`` or the end of the process that made it.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

from cuda_gym.errors import ConfigError, JudgeError
from cuda_gym.executors.base import Executor
from cuda_gym.executors.config import ExecutorConfig
from cuda_gym.executors.job import JudgeJob
from cuda_gym.judge import JudgeConfig
from cuda_gym.judge.result import JudgeResult

log = logging.getLogger(__name__)

ADDRESS_ENV = "CUDA_GYM_EXECUTOR_ADDRESS"
"""The Unix socket of the process tree's served pool (set by the process serving it)."""
AUTHKEY_ENV = "CUDA_GYM_EXECUTOR_AUTHKEY"
"""Its key (hex), checked by ``multiprocessing``'s HMAC handshake."""
OWNER_ENV = "CUDA_GYM_EXECUTOR_OWNER"
"""The pid of the process serving it (that process uses the pool itself, not a client)."""


class _Served:
    """What a pool server exposes: ``evaluate`` (blocks until the job's result) and ``info``."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def evaluate(self, job: JudgeJob) -> JudgeResult:
        return self.executor.submit(job).result()

    def info(self) -> dict[str, Any]:
        return {"kind": self.executor.kind, "device_flavour": self.executor.device_flavour}


_SERVED: _Served | None = None


def _served() -> _Served:
    assert _SERVED is not None
    return _SERVED


class _PoolManager(BaseManager):
    pass


_PoolManager.register("pool", callable=_served)


class PoolServer:
    """Serves an executor to other processes on a Unix socket (a ``multiprocessing.managers`` server)."""

    def __init__(self, executor: Executor) -> None:
        global _SERVED
        _SERVED = _Served(executor)
        self.folder = Path(tempfile.mkdtemp(prefix="cuda_gym_pool_"))  # 0700: only this user connects
        self.address = str(self.folder / "pool.sock")
        self.authkey = os.urandom(16)
        manager = _PoolManager(address=self.address, authkey=self.authkey)
        self._server = manager.get_server()
        self._thread = threading.Thread(target=self._serve, name="cuda-gym-pool-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._server.serve_forever()
        except SystemExit:  # serve_forever ends with sys.exit(0), meant for a server process of its own
            pass

    def export(self) -> None:
        """Publish the address to subprocesses started from now on (environment variables)."""
        os.environ[ADDRESS_ENV] = self.address
        os.environ[AUTHKEY_ENV] = self.authkey.hex()
        os.environ[OWNER_ENV] = str(os.getpid())

    def close(self) -> None:
        global _SERVED
        self._server.stop_event.set()  # type: ignore[attr-defined]
        self._thread.join(timeout=5)
        self._server.listener.close()  # type: ignore[attr-defined]  # also unlinks the socket
        if os.environ.get(ADDRESS_ENV) == self.address:
            for name in (ADDRESS_ENV, AUTHKEY_ENV, OWNER_ENV):
                os.environ.pop(name, None)
        shutil.rmtree(self.folder, ignore_errors=True)
        _SERVED = None


class PoolClient(Executor):
    """Another process's pool, through its server: ``submit`` sends the job and a thread waits for it.

    Jobs travel by pickling: a workspace by its path (both processes share this machine's disk).
    """

    kind = "client"

    def __init__(self, address: str, authkey: bytes, max_waiting: int = 64) -> None:
        manager = _PoolManager(address=address, authkey=authkey)
        try:
            manager.connect()
        except (OSError, EOFError) as exc:
            raise JudgeError(
                f"cannot reach the judge pool at {address} ({exc}): the process that served it has ended; "
                f"unset {ADDRESS_ENV} to make a pool in this process"
            ) from exc
        self._proxy: Any = manager.pool()  # type: ignore[attr-defined]
        self.device_flavour = str(self._proxy.info()["device_flavour"])
        self._waiters = ThreadPoolExecutor(max_workers=max_waiting, thread_name_prefix="cuda-gym-pool-client")

    def submit(self, job: JudgeJob) -> Future[JudgeResult]:
        """Send ``job`` to the pool; a future of its result."""
        return self._waiters.submit(self._proxy.evaluate, job)

    def close(self, cancel: bool = False) -> None:
        """Stop waiting (the pool itself belongs to the serving process)."""
        self._waiters.shutdown(wait=not cancel, cancel_futures=cancel)


_LOCK = threading.Lock()
_REGISTRY: dict[str, tuple[int, Executor, PoolServer | None]] = {}


def _key(config: ExecutorConfig, judge: JudgeConfig) -> str:
    return repr((config, judge.fingerprint(), judge.device if judge.device == "cpu" else "cuda", judge.cache_dir))


def shared_executor(config: ExecutorConfig, judge: JudgeConfig) -> Executor:
    """The process tree's executor for these settings (made now if none): see the module docstring.

    ``inline`` is never shared (each env has its own judge, as before executors existed).
    """
    if config.kind == "inline":
        from cuda_gym.executors.inline import InlineExecutor

        return InlineExecutor(judge)
    address, owner = os.environ.get(ADDRESS_ENV), os.environ.get(OWNER_ENV)
    if address and owner != str(os.getpid()):
        client = PoolClient(address, bytes.fromhex(os.environ.get(AUTHKEY_ENV, "")))
        if client.device_flavour != ("cuda" if judge.is_cuda else "cpu"):
            raise ConfigError(
                f"the served judge pool at {address} judges on {client.device_flavour}, this env on {judge.device}"
            )
        return client
    key = _key(config, judge)
    with _LOCK:
        held = _REGISTRY.get(key)
        if held is not None and held[0] == os.getpid():
            return held[1]
        executor = make_executor(config, judge)
        server = None
        if config.kind == "local":
            server = PoolServer(executor)
            if not os.environ.get(ADDRESS_ENV):
                server.export()
        if not _REGISTRY:
            atexit.register(shutdown_executors)
        _REGISTRY[key] = (os.getpid(), executor, server)
        return executor


def make_executor(config: ExecutorConfig, judge: JudgeConfig) -> Executor:
    """A new executor of ``config.kind`` judging with ``judge`` (not registered, the caller closes it)."""
    if config.kind == "inline":
        from cuda_gym.executors.inline import InlineExecutor

        return InlineExecutor(judge)
    if config.kind == "local":
        from cuda_gym.executors.pool import LocalGPUPool

        return LocalGPUPool(
            judge,
            devices=config.devices,
            lanes=config.lanes,
            warm_servers=config.warm_servers,
            build_workers=config.build_workers,
        )
    from cuda_gym.executors.ray_executor import RayExecutor

    return RayExecutor(
        judge,
        address=config.address,
        devices=config.devices,
        max_in_flight=config.max_in_flight,
        max_restarts=config.max_restarts,
        job_retries=config.job_retries,
        warm_servers=config.warm_servers,
    )


def shutdown_executors(cancel: bool = False) -> None:
    """Close every executor this process made through ``shared_executor`` (and stop serving them)."""
    with _LOCK:
        held = [v for v in _REGISTRY.values() if v[0] == os.getpid()]
        _REGISTRY.clear()
    for _, executor, server in held:
        if server is not None:
            server.close()
        try:
            executor.close(cancel=cancel)
        except Exception:  # noqa: BLE001 - shutting down: log and go on
            log.exception("closing an executor failed")
