"""The reference worker: the trusted side of the judge. It builds the reference and drives every server.

Run as ``python3 -m cuda_gym.judge.reference_worker --device DEV --cache-dir DIR``. It reads one typed
message (``cuda_gym.judge.messages``) per line on stdin and answers one per line on the original stdout;
everything task code prints goes to stderr. It lives across evaluations of one device (restarted
after faults) and keeps the prepared task while the same task is judged.

With ``--warm N`` it keeps N candidate servers started ahead (``WarmServers``): each is used for one
submission and discarded, so an evaluation starts on a process that already has torch imported and
its device context made.

Requests: ``Greet`` (fingerprint), ``Prepare`` (build ``Model`` under the init seed, write its state
and init inputs into the job dir, answer ``TaskFacts``), ``Evaluate`` (judge a submission through a
sandboxed candidate server: ``EvaluationReport``), ``TimeBaseline`` (eager or ``torch.compile`` through
the same protocol: ``BaselineReport``), ``ProfileReference`` (eager per-kernel table), ``Quit``.
Failures answer ``WorkerFailure``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import torch

from cuda_gym.errors import DeviceStuckError, StopTimeout
from cuda_gym.judge import harness
from cuda_gym.judge.driver import PAUSE_TIMEOUT_S, ServerSession, ServerSpec
from cuda_gym.judge.messages import (
    Done,
    Evaluate,
    Greet,
    Greeting,
    Prepare,
    ProfileReference,
    ProfileReport,
    ProtocolError,
    Quit,
    RunSettings,
    TaskFacts,
    TimeBaseline,
    WorkerFailure,
    decode,
    encode,
)
from cuda_gym.judge.procedure import Driver, _plain
from cuda_gym.sandbox import die_with_parent
from cuda_gym.trees import remove_tree

log = logging.getLogger(__name__)

LOG_LEVEL_ENV = "CUDA_GYM_WORKER_LOG_LEVEL"
"""The worker's log level (``WARNING``; ``DEBUG`` logs every call of the driver), in its log file under the
judge's cache (``judge/logs``)."""

REQUESTS = (Greet, Prepare, Evaluate, TimeBaseline, ProfileReference, Quit)


class _Prepared:
    """A task built on the device: its module, model, facts and output layout (``procedure.PreparedTask``)."""

    def __init__(self, code: str, code_hash: str, device: str, init_seed: int) -> None:
        self.code = code
        self.code_hash = code_hash
        self.device = device
        self.init_seed = init_seed
        self.module = harness.load_task_module(code, f"cuda_gym_ref_{code_hash[:12]}")
        self.get_inputs = self.module.get_inputs
        self.init_inputs = harness.make_init_inputs(self.module.get_init_inputs, init_seed, device)
        self.model = harness.build_model(self.module.Model, self.init_inputs, init_seed, device)
        self.low_variance: str | None = None
        inputs = harness.make_inputs(self.get_inputs, init_seed, device)
        with torch.no_grad():
            out = _plain(self.model(*inputs))
            harness.synchronize(device)
            t0 = time.perf_counter()
            self.model(*inputs)
            harness.synchronize(device)
            call_ms = (time.perf_counter() - t0) * 1000.0
        facts = harness.output_facts(out)
        self.template = harness.shape_template(out)  # held as long as the task: no copy of its output
        self.facts = TaskFacts(
            output_bytes=int(facts["output_bytes"]),
            integer_output=bool(facts["integer_output"]),
            input_bytes=harness.input_bytes(inputs),
            dtype=harness.input_dtype(inputs),
            flops=harness.count_flops(self.model, inputs),
            param_bytes=sum(p.numel() * p.element_size() for p in self.model.state_dict().values()),
            call_ms=call_ms,
        )
        del inputs

    def write_job(self, job_dir: Path) -> None:
        """The state dict and init inputs a server loads, on the CPU (read with ``weights_only``)."""
        state = {k: v.detach().to("cpu") for k, v in self.model.state_dict().items()}
        torch.save(state, job_dir / "state_dict.pt")
        init = [x.detach().to("cpu") if isinstance(x, torch.Tensor) else x for x in self.init_inputs]
        torch.save(init, job_dir / "init_inputs.pt")


WARM_TTL_S = 600.0
"""A warm server unused this long is discarded: its sandbox's wall limit counts from its start, so it
gets the evaluation's wall budget plus this."""
WARM_FILE_BYTES = 64 * 2**30
"""File-size limit of a warm server (made before its task is known; a fresh one gets 4x the task's output)."""


SPAWN_WAIT_S = 5.0
"""``quiet`` waits this long for a server refilled just before to have a process it can pause."""


class _Warm:
    """One server started ahead: its session, its job slot and the thread that waits for its ``Hello``."""

    def __init__(self, session: ServerSession, slot: Path) -> None:
        self.session = session
        self.slot = slot
        self.error = ""
        self.born = time.monotonic()
        self.segments: Any = None
        self.thread = threading.Thread(target=self._boot, name="cuda-gym-warm-server", daemon=True)

    def _boot(self) -> None:
        try:
            self.session.start(self.segments)
        except Exception as exc:  # noqa: BLE001 - a server that does not start is discarded, never used
            self.error = str(exc)

    def launch(self, segments: Any) -> _Warm:
        self.segments = segments
        self.thread.start()
        return self

    @property
    def booting(self) -> bool:
        return self.thread.is_alive()

    def spawned(self, timeout_s: float) -> Any:
        """Its sandboxed process once it exists (``None`` if its start failed or took longer than
        ``timeout_s``): a booting server gets its process from the boot thread, some milliseconds after
        ``launch``."""
        until = time.monotonic() + timeout_s
        while self.session.proc is None and self.booting and time.monotonic() < until:
            time.sleep(0.001)
        return self.session.proc

    def ready(self) -> bool:
        """Wait for its ``Hello``; whether it is up and unused."""
        self.thread.join()
        return not self.error and self.session.channel is not None and self.session.proc.poll() is None

    def discard(self) -> None:
        """Kill the server and remove its slot."""
        self.thread.join()
        try:
            self.session.close()
        except Exception:  # noqa: BLE001 - best effort
            pass
        remove_tree(self.slot)


class WarmServers:
    """Candidate servers started ahead of the evaluations that will use them, one submission each.

    A server's sandbox binds are fixed when it starts, so each gets a private job slot: ``slot/job``
    (read-only inside) into which this trusted process copies the job's files (state dict, init inputs,
    the submission and its built modules) just before ``Load``, and ``slot/torch_extensions`` (its only
    writable folder). ``place`` takes the oldest warm server for a request and rewrites the request's
    paths into its slot; ``refill`` starts replacements at once, so they boot while the current
    submission runs; ``quiet`` pauses (SIGSTOP) servers still booting while timed calls run, so their
    torch import and device-context creation never overlap a measurement. The ``Driver`` gets the
    server through ``session`` (its ``sessions`` factory) and falls back to a fresh one.
    """

    def __init__(self, driver: Driver, count: int) -> None:
        self.driver = driver
        self.count = count
        self.stock: list[_Warm] = []
        self.key: int | None = None
        """The memory limit the stock was started with."""
        self.wall_s = 0.0
        """The largest wall budget seen: the stock's sandboxes get it plus ``WARM_TTL_S``."""
        self.root = Path(tempfile.mkdtemp(prefix="cuda_gym_slots_"))
        self._next: _Warm | None = None
        self._current: _Warm | None = None
        driver.sessions = self.session
        driver.quiet = self.quiet

    def run(self, task: _Prepared, req: Any, evaluate: Callable[[Any, Any], Any]) -> Any:
        """``evaluate(task, req)`` on a warm server (a fresh one if none is warm), then refill the stock."""
        req = self.place(req)
        self.refill(task, req.settings)
        try:
            return evaluate(task, req)
        finally:
            self._next = None
            if self._current is not None:
                self._current.discard()
                self._current = None

    def place(self, req: Any) -> Any:
        """Take a warm server for ``req``; ``req`` with every path moved into its slot (unchanged if none)."""
        if self.key != req.settings.memory_bytes or req.settings.wall_s > self.wall_s or bool(getattr(req, "writable", None)):
            return req  # limits differ from the stock's (refill replaces it) or the job needs its own binds
        while self.stock:
            warm = self.stock.pop(0)
            if time.monotonic() - warm.born > WARM_TTL_S or not warm.ready():
                warm.discard()
                continue
            self._next = warm
            return _relocate(req, warm.slot / "job")
        return req

    def refill(self, task: _Prepared, s: RunSettings) -> None:
        """Start servers until ``count`` are warm or booting, for these limits."""
        # One stock for every mode: a verify job (no timing budget) may run on a server started for a
        # full one; its wall limit is only the sandbox's safety net, the driver bounds every step itself.
        if s.memory_bytes != self.key or s.wall_s > self.wall_s:
            self.clear()
            self.key, self.wall_s = s.memory_bytes, max(s.wall_s, self.wall_s)
        while len(self.stock) < self.count:
            slot = Path(tempfile.mkdtemp(prefix="slot_", dir=self.root))
            (slot / "job").mkdir()
            spec = self.driver._spec(task, s, slot, [slot / "job"], [])
            spec.limits = dataclasses.replace(
                spec.limits, wall_s=self.wall_s + WARM_TTL_S, file_bytes=max(spec.limits.file_bytes or 0, WARM_FILE_BYTES)
            )
            self.stock.append(_Warm(ServerSession(spec), slot).launch(self.driver.segments))

    def session(self, spec: ServerSpec) -> ServerSession:
        """The session for ``spec``: the warm server ``place`` took (with ``spec``'s time bounds), or a fresh one."""
        warm, self._next = self._next, None
        if warm is None:
            return ServerSession(spec)
        warm.session.spec.load_timeout_s = spec.load_timeout_s
        warm.session.spec.call_timeout_s = spec.call_timeout_s
        self._current = warm
        return warm.session

    @contextlib.contextmanager
    def quiet(self) -> Iterator[None]:
        """Pause every server in stock, booting or idle (its whole sandbox, every thread seen stopped), while
        the block runs: an idle server spins on its channel and a booting one imports torch; neither may share
        the CPUs and the GPU with a calibration or a timed call. One that cannot be stopped is discarded."""
        paused: list[tuple[Any, list[int]]] = []
        for warm in list(self.stock):
            # a server refilled just before has no process yet: without the wait it boots through the block
            proc = warm.spawned(SPAWN_WAIT_S)
            if proc is None or proc.poll() is not None:
                continue
            try:
                paused.append((proc, proc.pause(PAUSE_TIMEOUT_S)))
            except (StopTimeout, OSError) as exc:
                log.warning("a warm server could not be stopped for a timed block (%s): discarded", exc)
                self.stock.remove(warm)
                proc.kill()  # first: a booting one's thread waits for a Hello that a half-stopped tree never sends
                warm.discard()
        try:
            yield
        finally:
            for proc, pids in paused:
                proc.resume(pids)

    def clear(self) -> None:
        """Kill every warm server."""
        for warm in self.stock:
            warm.discard()
        self.stock = []

    def close(self) -> None:
        """Kill every warm server and remove the slots."""
        self.clear()
        remove_tree(self.root)


def _copy_in(src: Path, dest: Path) -> None:
    """Copy a file or a folder's regular files into ``dest`` (links and special files are left out)."""
    if src.is_symlink():
        return
    if src.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        return
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]
        for name in files:
            path = Path(root) / name
            if not path.is_symlink() and path.is_file():
                target = dest / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)


def _relocate(req: Any, slot: Path) -> Any:
    """Copy a request's files into a warm server's slot (trusted side, before ``Load``); the request
    with the slot's paths."""
    job_dir = Path(req.job_dir)
    for name in ("state_dict.pt", "init_inputs.pt"):
        if (job_dir / name).is_file():
            shutil.copyfile(job_dir / name, slot / name)
    moved: dict[str, str] = {}
    for i, entry in enumerate(getattr(req, "readonly", ())):
        src = Path(entry)
        dest = slot / f"ro{i}" / src.name
        _copy_in(src, dest)
        moved[str(src)] = str(dest)

    def where(path: str) -> str:
        if not path:
            return path
        for src in sorted(moved, key=len, reverse=True):
            if path == src or path.startswith(src + os.sep):
                return moved[src] + path[len(src) :]
        return path

    if not isinstance(req, Evaluate):
        return dataclasses.replace(req, job_dir=str(slot))
    manifest = where(req.inline_manifest)
    if manifest:
        table = json.loads(Path(manifest).read_text())
        Path(manifest).write_text(json.dumps({k: where(str(v)) for k, v in table.items()}))
    return dataclasses.replace(
        req,
        job_dir=str(slot),
        solution_path=where(req.solution_path),
        workspace_root=where(req.workspace_root),
        module_path=where(req.module_path),
        inline_manifest=manifest,
        readonly=(),
    )


class ReferenceServer:
    """Holds the prepared task (one at a time) and the driver, and answers requests."""

    def __init__(self, device: str, cache_root: Path, warm: int = 0) -> None:
        self.device = device
        self.task: _Prepared | None = None
        if device.startswith("cuda"):
            torch.cuda.set_device(device)
        harness.warm_device(device)
        self.driver = Driver(device, cache_root)
        self.warm = WarmServers(self.driver, warm) if warm > 0 else None

    def handle(self, req: Any) -> Any:
        """The answer to one request."""
        if isinstance(req, Greet):
            return Greeting(fingerprint=harness.fingerprint(self.device))
        if isinstance(req, Prepare):
            return self.prepare(req)
        if isinstance(req, Evaluate):
            return self._run(self._task(req.code_hash), req, self.driver.evaluate)
        if isinstance(req, TimeBaseline):
            return self._run(self._task(req.code_hash), req, self.driver.time_baseline)
        if isinstance(req, ProfileReference):
            task = self._task(req.code_hash)
            rows = harness.profile_table(task.model, task.get_inputs, self.device, list(range(1, req.calls + 1)))
            return ProfileReport(rows=tuple((str(r["name"]), int(r["calls"]), float(r["total_ms"])) for r in rows))
        raise ProtocolError(f"unexpected request {type(req).__name__}")

    def _run(self, task: _Prepared, req: Any, evaluate: Callable[[Any, Any], Any]) -> Any:
        if self.warm is None:
            return evaluate(task, req)
        return self.warm.run(task, req, evaluate)

    def idle(self) -> None:
        """Give the caching allocator's blocks back to the device, once an answer went out and the device is
        sound (``cudaFree`` waits for the whole device: after a stuck stream it would never return). A
        KernelBench task's inputs and outputs take 6 GiB each, and an idle worker of a second judge held
        61.8 GiB of an H100's 79 (2026-12-05)."""
        if self.device.startswith("cuda"):
            with contextlib.suppress(RuntimeError):  # a broken device says so on the next request
                torch.cuda.empty_cache()

    def close(self) -> None:
        """Kill the warm servers."""
        if self.warm is not None:
            self.warm.close()

    def _task(self, code_hash: str) -> _Prepared:
        if self.task is None or self.task.code_hash != code_hash:
            raise RuntimeError("the task is not prepared in this worker: send Prepare first")
        return self.task

    def prepare(self, req: Prepare) -> TaskFacts:
        """Build the task (unless it is the one held) and write its state into the job dir."""
        if self.task is None or self.task.code_hash != req.code_hash:
            self.task = None
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            self.task = _Prepared(req.code, req.code_hash, self.device, req.init_seed)
        if req.job_dir:
            self.task.write_job(Path(req.job_dir))
        return self.task.facts


def _reply(out: TextIO, msg: Any) -> None:
    out.write(encode(msg).decode() + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    """Serve requests until ``Quit`` or end of input."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", required=True)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--warm", type=int, default=0, help="candidate servers kept started ahead")
    parser.add_argument("--parent", type=int, default=0, help="the orchestrator's pid: end at once if it is gone")
    args = parser.parse_args(argv)
    # SIGKILL when the orchestrator dies: a worker whose Judge was killed in the middle of a request went on
    # timing, pinned to a timing lane's CPU, beside the next judge's (H100, 2026-12-05)
    if args.parent and not die_with_parent(args.parent):
        return 1  # its orchestrator died before the parent-death signal was set
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # task code's prints must not corrupt the protocol
    sys.stdout = sys.stderr
    logging.basicConfig(
        level=os.environ.get(LOG_LEVEL_ENV, "WARNING").upper(), stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every thread's stack in the worker's log
    server = ReferenceServer(args.device, Path(args.cache_dir), args.warm)
    try:
        return _serve(server, proto)
    finally:
        server.close()


def _serve(server: ReferenceServer, proto: TextIO) -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = decode(line, REQUESTS)
        except ProtocolError as exc:
            _reply(proto, WorkerFailure(error=f"bad request: {exc}", fatal=True))
            continue
        if isinstance(req, Quit):
            _reply(proto, Done())
            break
        try:
            _reply(proto, server.handle(req))
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the orchestrator
            fatal = "CUDA error" in str(exc) or isinstance(exc, (torch.OutOfMemoryError, DeviceStuckError))
            _reply(
                proto,
                WorkerFailure(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=8), fatal=fatal),
            )
            if fatal:
                return 3  # a faulted CUDA context cannot be trusted: the orchestrator restarts us
        server.idle()
    return 0


if __name__ == "__main__":
    sys.exit(main())
