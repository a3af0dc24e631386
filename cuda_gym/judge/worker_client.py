"""The orchestrator's client of the reference worker: one long-lived trusted process, restarted after faults."""

from __future__ import annotations

import logging
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cuda_gym.errors import JudgeError, ProtocolError
from cuda_gym.judge.messages import Greet, Greeting, Quit, WorkerFailure, decode, encode
from cuda_gym.judge.transport import EAGER_MODULES_ENV
from cuda_gym.sandbox import spawn
from cuda_gym.text import clean_output

log = logging.getLogger(__name__)


def package_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a judge worker: ours, plus ``PYTHONPATH`` so ``cuda_gym`` imports from a checkout."""
    from cuda_gym.paths import package_pythonpath

    env = dict(os.environ)
    env["PYTHONPATH"] = package_pythonpath()
    env.update(extra or {})
    return env


class ReferenceWorker:
    """A long-lived ``cuda_gym.judge.reference_worker`` process for one device.

    ``request(msg, expected)`` sends one typed message and waits for its typed answer; a crash, a
    timeout, a ``WorkerFailure`` or a malformed answer raises ``JudgeError`` (after a crash or a fatal
    failure the next request starts a fresh process). ``warm_servers``: candidate servers the worker
    keeps started ahead (``reference_worker.WarmServers``).
    """

    def __init__(self, device: str, log_dir: Path, timeout_s: float, cache_root: Path, warm_servers: int = 0) -> None:
        self.device = device
        self.warm_servers = warm_servers
        self.cache_root = cache_root
        self.timeout_s = timeout_s
        self.log_path = log_dir / f"reference_worker_{os.getpid()}_{device.replace(':', '')}_{id(self):x}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self.fingerprint: dict[str, str] = {}

    @property
    def device_name(self) -> str:
        """The device's name from the fingerprint (empty before the first start): a baseline-cache key."""
        return self.fingerprint.get("device_name", "")

    @property
    def alive(self) -> bool:
        """Whether the process is running."""
        return self.proc is not None and self.proc.poll() is None

    def _env(self) -> dict[str, str]:
        """The worker's own settings on a GPU. Every CUDA module is loaded when its context is made
        (``transport.EAGER_MODULES_ENV``; the driver refuses to time otherwise): lazily loaded, the first
        launch of a kernel inside a gated window hung the driver (H100, 2026-12-05). That costs a worker about
        3 s at its start and 0.6 GiB of GPU memory (same H100). And its OpenMP pool (its few CPU operations)
        must not spin beside the pinned timing CPUs after each parallel region: it sleeps at once, as the
        servers' pools do. On the CPU the driver computes every reference output there and keeps OpenMP's
        default (a short spin, then sleep)."""
        if not self.device.startswith("cuda"):
            return {}
        env = dict(EAGER_MODULES_ENV)
        if "OMP_WAIT_POLICY" not in os.environ:
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        return env

    def start(self) -> None:
        """Start the process (if needed) and read its fingerprint."""
        if self.alive:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        errlog = open(self.log_path, "ab")
        try:
            # From the spawner thread: the worker asks to die with this process (``--parent``), and its
            # servers die with it.
            self.proc = spawn(
                [
                    sys.executable,
                    "-m",
                    "cuda_gym.judge.reference_worker",
                    "--device",
                    self.device,
                    "--cache-dir",
                    str(self.cache_root),
                    "--warm",
                    str(self.warm_servers),
                    "--parent",
                    str(os.getpid()),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errlog,
                env=package_env(self._env()),
                start_new_session=True,
            )
        finally:
            errlog.close()
        self._buf = b""
        hello = self.request(Greet(), Greeting, timeout_s=300)
        self.fingerprint = dict(hello.fingerprint)

    def request(self, msg: Any, expected: type, timeout_s: float | None = None) -> Any:
        """Send ``msg``; return the answer of type ``expected`` or raise ``JudgeError``."""
        if not self.alive:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        op = type(msg).__name__
        try:
            self.proc.stdin.write(encode(msg) + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._fail(f"the reference worker is gone ({exc})")
        line = self._readline(self.timeout_s if timeout_s is None else timeout_s, op)
        try:
            answer = decode(line, (expected, WorkerFailure))
        except ProtocolError as exc:
            self._fail(f"the reference worker answered {op} with a malformed message ({exc}): {line[:200]!r}")
        if isinstance(answer, WorkerFailure):
            if answer.fatal or not self.alive:
                self.kill()
            raise JudgeError(
                f"the reference program or the judge failed in {op}: {answer.error}\n"
                f"{answer.traceback}Check that the task runs on {self.device}."
            )
        return answer

    def _readline(self, timeout_s: float, op: str) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        # poll(2), not epoll: a candidate's sandbox runs as this user and can use up its epoll watches (red team 8, E1)
        with selectors.PollSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(f"the reference worker did not answer {op!r} within {timeout_s:.0f} s")
                if not sel.select(timeout=min(left, 1.0)):
                    if self.proc.poll() is not None:
                        self._fail(f"the reference worker died (exit code {self.proc.returncode}) during {op!r}")
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.proc.wait(timeout=10)
                    self._fail(f"the reference worker died (exit code {self.proc.returncode}) during {op!r}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", errors="replace")

    def _fail(self, message: str) -> None:
        self.kill()
        tail = ""
        try:
            tail = clean_output(self.log_path.read_bytes()[-4000:], 2000)
        except OSError:
            pass
        raise JudgeError(f"{message}; it will be restarted on the next request. Its log ends with:\n{tail}")

    def kill(self) -> None:
        """Stop the process now."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.proc = None

    def close(self) -> None:
        """Ask the process to quit, then make sure it did."""
        if self.alive:
            try:
                from cuda_gym.judge.messages import Done

                self.request(Quit(), Done, timeout_s=10)
            except JudgeError:
                pass
        self.kill()
