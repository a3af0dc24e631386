"""Daemon threads that run the jobs handed to them one after the other, one per name and process.

The sandbox forks every sandbox and helper process from one (``sandbox.spawn``: a child's parent-death
signal fires when the thread that forked it ends), and the judge's transport closes what a server sent on
another (``fd_closer.close_fds``: a close may block). A daemon thread is not joined when the main thread
returns (a ``ThreadPoolExecutor``'s is, before ``atexit`` handlers and other threads), so it lives exactly
as long as its process.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from collections.abc import Callable
from typing import Any


class JobThread:
    """One daemon thread running the callables handed to it, in order.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            job, future = self.jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
                    future.set_exception(exc)

    def submit(self, job: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Queue ``job``; its future."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs.put((job, future))
        return future

    def run(self, job: Callable[[], Any]) -> Any:
        """``job()`` on the thread: its result, or its exception raised here."""
        return self.submit(job).result()


_THREADS: dict[str, JobThread] = {}
_LOCK = threading.Lock()


def job_thread(name: str) -> JobThread:
    """This process's job thread called ``name``, started at the first call (``RuntimeError`` while the
    interpreter shuts down and no thread may start)."""
    with _LOCK:
        if name not in _THREADS:
            _THREADS[name] = JobThread(name)
        return _THREADS[name]


def _reset() -> None:
    global _LOCK
    _THREADS.clear()  # a forked child has none of its parent's threads
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_reset)
