"""The evaluation procedure the trusted driver runs: correctness calls, warm-up, timed calls, checks.

``evaluate`` judges one submission through a ``ServerSession``; ``time_baseline`` times the reference
(eager or ``torch.compile``) through the very same protocol, so candidate and baselines are measured
alike. Every seed, the checked positions and the reference outputs stay in this process.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import torch

from cuda_gym.errors import JudgeError
from cuda_gym.judge import cpu_load, harness
from cuda_gym.judge.baselines import inductor_cache
from cuda_gym.judge.compare import compare_outputs, constant_would_pass
from cuda_gym.judge.driver import BUSY_SHARE, CallResult, ServerSession, ServerSpec
from cuda_gym.judge.held_out import held_out_code
from cuda_gym.judge.messages import (
    BaselineReport,
    Evaluate,
    EvaluationReport,
    Load,
    RunSettings,
    ServerKind,
    TaskFacts,
    TimeBaseline,
    TrialFacts,
)
from cuda_gym.judge.transport import DevicePool
from cuda_gym.sandbox import Limits

log = logging.getLogger(__name__)

FIRST_CALL_EXTRA_S = 20.0
"""Extra time bound of a program's first call (lazy initialisation: cuBLAS handles, JIT, autotuning)."""
IDLE_CPU_S, IDLE_CPU_SHARE = 0.05, 0.05
"""``background-work`` when the server's helper threads use more CPU than 0.05 s + 5% of the idle wall time
while no call runs. Honest servers measured 0.00 s (OpenMP pools sleep: ``OMP_WAIT_POLICY=PASSIVE``); a
Python helper that prefetches outputs used 0.17 s in 0.7 s (c34)."""
HELD_OUT_CALLS = 2
"""Checked calls on held-out shapes (``JudgeConfig.held_out_shapes``)."""
CALL_BOUND_FACTOR = 100.0
"""A call may take this many times the reference's own call time on top of ``call_timeout_s``."""


class PreparedTask(Protocol):
    """What the driver needs of a task built in its process (``reference_worker._Prepared``)."""

    code: str
    code_hash: str
    device: str
    model: Any
    get_inputs: Any
    init_seed: int
    facts: TaskFacts
    template: Any
    low_variance: str | None


SERVER_MEMORY_FACTOR = 4
"""A server that held more GPU memory than this many times the task's inputs, outputs and parameters (+ 1 GiB)
when the driver ran out of it caused the shortage (the submission's -1); beside one that held less, the
device is short of memory for the task (a ``JudgeError``)."""

SERVER_ENTRIES = 10_000
"""Files, folders and links a candidate (or eager reference) server may leave in its writable folder."""

class Driver:
    """The driver's state shared by evaluations: device, caches, the exportable input pool (GPU)."""

    def __init__(self, device: str, cache_root: Path) -> None:
        self.device = device
        self.cuda = device.startswith("cuda")
        self.cache_root = cache_root
        self.segments: DevicePool | None = None
        self.sessions: Callable[[ServerSpec], ServerSession] = ServerSession
        """Makes the session of one evaluation or baseline from its spec; the reference worker's warm
        stock returns one already started (``reference_worker.WarmServers``)."""
        self.quiet: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
        """Entered around the timed calls (the warm stock pauses servers still booting)."""
        if self.cuda:
            from cuda_gym.judge.transport import vmm_pool_library

            self.segments = DevicePool(vmm_pool_library(cache_root), device)

    # ------------------------------------------------------------------ public

    def evaluate(self, task: PreparedTask, req: Evaluate) -> EvaluationReport:
        """Judge one submission (see the module docstring)."""
        started = time.perf_counter()
        s = req.settings
        spec = self._spec(task, s, Path(req.job_dir), [Path(p) for p in req.readonly], [Path(p) for p in req.writable])
        session = self.sessions(spec)
        out: dict[str, Any] = {"stage": "start", "violations": []}
        try:
            self._open(session, task, s)
            out["stage"] = "import"
            loaded = session.load(
                self._load(
                    task,
                    req.kind,
                    req.job_dir,
                    solution_path=req.solution_path,
                    workspace_root=req.workspace_root,
                    module_path=req.module_path,
                    inline_manifest=req.inline_manifest,
                )
            )
            out["violations"] += list(loaded.violations)
            if loaded.error:
                out.update(
                    stage=loaded.stage or "import",
                    error=loaded.error,
                    import_failed=req.kind == "single" and (loaded.stage or "import") == "import",
                )
                return self._report(out, session, started)
            self._process_checks(session, s, out, "after loading the submission")
            out["stage"] = "correctness"
            trials, refs = self._correctness(task, session, s, out)
            if s.held_out and not out.get("error"):
                trials += self._held_out(task, session, s, out)
            out["trials"] = trials
            if task.low_variance is None and len(refs) >= 2:
                task.low_variance = constant_would_pass(refs, s.tolerances)
            out["low_variance"] = task.low_variance or ""
            if out.get("error") or req.mode == "verify":
                return self._report(out, session, started)
            out["stage"] = "timing"
            with self.quiet():
                timed = self._timed(task, session, s, out, check=True)
            out["trials"] = trials + timed["trials"]
            out.update(
                times_ms=timed["times"],
                raw_ms=timed["raw"],
                event_ms=timed["events"],
                diagnostics=timed.get("diagnostics", {}),
            )
            if not out.get("error") and req.mode == "profile":
                out["stage"] = "profile"
                res = session.call(self._inputs(task), profile=True, timeout_s=self._bound(task, s, False))
                out["profile"] = res.profile
            if not out.get("error"):
                out["stage"] = "done"
            return self._report(out, session, started)
        except torch.OutOfMemoryError as exc:
            if not self.cuda or out["stage"] == "start":
                raise  # before the submission's code ran: the task's or the judge's own failure
            held = self._server_memory(session)
            # GPU memory is no sandbox limit: a server that holds far more than the task's own tensors makes
            # the driver's next allocation fail, which is the submission's doing; beside a server that held
            # little, the device itself is short of memory for the task: the judge's failure.
            facts = task.facts
            allowance = SERVER_MEMORY_FACTOR * (facts.input_bytes + facts.output_bytes + facts.param_bytes) + 2**30
            if held <= allowance:
                raise JudgeError(f"the GPU ran out of memory beside a server that held {held / 2**30:.1f} GiB: the task "
                                 f"needs more memory than the device has free ({exc})") from exc
            out["error"] = (f"{out['stage']}: the GPU ran out of memory while the submission's server held "
                            f"{held / 2**30:.1f} GiB of it (more than {allowance / 2**30:.1f} GiB, {SERVER_MEMORY_FACTOR}x "
                            f"the task's inputs, outputs and parameters + 1 GiB; the judge needs room beside it): {exc}")
            return self._report(out, session, started)
        finally:
            session.close()

    def _server_memory(self, session: ServerSession) -> int:
        """GPU bytes the session's server held: the free memory once it is gone less the free memory now."""
        torch.cuda.empty_cache()
        before = torch.cuda.mem_get_info(self.device)[0]
        session.close()  # kills the server: its context's memory goes back
        torch.cuda.empty_cache()
        return max(0, torch.cuda.mem_get_info(self.device)[0] - before)

    def time_baseline(self, task: PreparedTask, req: TimeBaseline) -> BaselineReport:
        """Time the reference through the protocol (a server of kind ``reference`` or ``compile``)."""
        s = req.settings
        writable = [inductor_cache(self.cache_root)] if req.kind == "compile" else []
        spec = self._spec(task, s, Path(req.job_dir), [], writable, trusted=req.kind == "compile")
        if writable:  # trusted reference code only: the compile servers share inductor's caches
            spec.env["TORCHINDUCTOR_CACHE_DIR"] = str(writable[0])
        session = self.sessions(spec)
        try:
            self._open(session, task, s)
            loaded = session.load(self._load(task, req.kind, req.job_dir, task_code=task.code))
            if loaded.error:
                return BaselineReport(error=loaded.error)
            out: dict[str, Any] = {"violations": []}
            # torch.compile compiles in the first call: it gets the whole wall budget, not a call's bound
            first = s.wall_s if req.kind == "compile" else None
            # On a GPU checked like a candidate's timed calls (the verdicts are not used): the same driver
            # work between calls, so the GPU (its clocks, the other context) comes to every window in the
            # same state. The CPU has no such state to equalize.
            with self.quiet():
                timed = self._timed(task, session, s, out, check=self.cuda, first_bound_s=first)
            if out.get("error"):
                return BaselineReport(error=str(out["error"]))
            return BaselineReport(
                times_ms=tuple(timed["times"]),
                raw_ms=tuple(timed["raw"]),
                event_ms=tuple(timed["events"]),
                overhead_ms=session.overhead_ms,
                resolution_ms=session.resolution_ms,
            )
        finally:
            session.close()

    # ------------------------------------------------------------------ stages

    def _spec(
        self, task: PreparedTask, s: RunSettings, job_dir: Path, readonly: list[Path], writable: list[Path],
        trusted: bool = False,
    ) -> ServerSpec:
        """How to start a server; ``trusted``: the reference compiled by ``torch.compile`` (it runs as the judge's
        uid: the compile servers share the inductor cache while they run, which sandboxes of their own uids
        cannot, red team 9, C1)."""
        import os

        from cuda_gym.paths import package_pythonpath

        env = {"PYTHONPATH": package_pythonpath(), "TORCH_EXTENSIONS_DIR": str(job_dir / "torch_extensions")}
        # Idle pool threads must not burn CPU between calls (CPU: the idle-work check; GPU: a spinning
        # thread beside the pinned timing CPUs slows the round trips it shares a core with).
        env["OMP_WAIT_POLICY"] = "PASSIVE"
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_HOME", "MAX_JOBS"):
            if var in os.environ:
                env[var] = os.environ[var]
        (job_dir / "torch_extensions").mkdir(exist_ok=True)
        limits = Limits(
            wall_s=s.wall_s,
            memory_bytes=s.memory_bytes or None,
            file_bytes=max(4 * 2**30, 4 * task.facts.output_bytes),
            processes=4096,
            nice=0,  # timed: every other sandbox (builds, recordings, agent commands) runs at 19
            # A server writes nothing a judgement needs (its extension is prebuilt): a small folder. Every
            # entry it makes is walked about every second and at its end, and removed after, by the driver's
            # side; a million empty folders held a judge lane for minutes (red team 3). The compile servers'
            # shared inductor cache (``writable``) grows with the tasks: the sandbox's default bound.
            **({} if writable else {"entries": SERVER_ENTRIES}),
        )
        # The job dir stays invisible but for what the server reads; its only writable folder is the
        # private torch-extensions folder of this evaluation (nothing another evaluation reads).
        state = [job_dir / "state_dict.pt", job_dir / "init_inputs.pt"]
        return ServerSpec(
            device=self.device,
            job_dir=job_dir / "torch_extensions",
            cache_root=self.cache_root,
            readonly=[*state, *readonly],
            writable=[job_dir / "torch_extensions", *writable],
            env=env,
            limits=limits,
            load_timeout_s=s.load_timeout_s,
            call_timeout_s=self._bound(task, s, False),
            own_uid=not trusted,
        )

    def _load(self, task: PreparedTask, kind: ServerKind, job_dir: str, **program: str) -> Load:
        """The ``Load`` of a program; the state dict and init inputs come from the job dir (``Prepare``)."""
        return Load(
            kind=kind,
            device=self.device,
            init_seed=task.init_seed,
            state_path=str(Path(job_dir) / "state_dict.pt"),
            init_path=str(Path(job_dir) / "init_inputs.pt"),
            **program,
        )

    def _open(self, session: ServerSession, task: PreparedTask, s: RunSettings) -> None:
        if session.channel is None:  # a warm session is started already
            session.start(self.segments)
        arena = 4 * task.facts.input_bytes + 2**20
        with self.quiet():  # warm servers booting or idle in stock must not run during the calibration
            session.calibrate(task.template, lambda: self._inputs(task), arena)

    def _bound(self, task: PreparedTask, s: RunSettings, first: bool) -> float:
        return s.call_timeout_s + CALL_BOUND_FACTOR * task.facts.call_ms / 1000.0 + (FIRST_CALL_EXTRA_S if first else 0.0)

    def _inputs(self, task: PreparedTask, seed: int | None = None, get_inputs: Any = None) -> list[Any]:
        seed = secrets.randbits(63) if seed is None else seed
        make = get_inputs or task.get_inputs
        # GPU: in the driver's own memory, never in the shared pool (a server maps every pool segment it was
        # given): the timing stream copies them into shared buffers inside the call's window.
        return harness.make_inputs(make, seed, self.device)

    def _correctness(
        self, task: PreparedTask, session: ServerSession, s: RunSettings, out: dict[str, Any]
    ) -> tuple[list[TrialFacts], list[Any]]:
        trials: list[TrialFacts] = []
        refs: list[Any] = []
        for j in range(s.correctness_trials):
            seed = secrets.randbits(63)
            res, trial, ref = self._checked_call(task, session, s, out, seed, audit=True, first=j == 0, timed=False)
            if ref is not None and task.low_variance is None:
                refs.append(harness.sample_large(ref, seed, s.sample_threshold_bytes))
            if trial is not None:
                trials.append(trial)
            if res.error:
                out["error"] = f"correctness call {j + 1}: {res.error}"
                break
        return trials, refs

    def _held_out(self, task: PreparedTask, session: ServerSession, s: RunSettings, out: dict[str, Any]) -> list[TrialFacts]:
        """Two more checked calls on held-out input shapes (``cuda_gym.judge.held_out``), if the task has any."""
        code = held_out_code(task.code)
        if code is None:
            return []
        get_inputs = harness.load_task_module(code, f"cuda_gym_held_out_{task.code_hash[:12]}").get_inputs
        trials = []
        for j in range(HELD_OUT_CALLS):
            res, trial, _ = self._checked_call(
                task, session, s, out, secrets.randbits(63), audit=False, first=False, timed=False, get_inputs=get_inputs
            )
            if trial is not None:
                trials.append(
                    replace(trial, held_out=True, message=f"held-out shape: {trial.message}" if trial.message else "")
                )
            if res.error:
                out["error"] = f"held-out shape call {j + 1}: {res.error}"
                break
        return trials

    def _checked_call(
        self,
        task: PreparedTask,
        session: ServerSession,
        s: RunSettings,
        out: dict[str, Any],
        seed: int,
        *,
        audit: bool,
        first: bool,
        timed: bool,
        get_inputs: Any = None,
    ) -> tuple[CallResult, TrialFacts | None, Any]:
        # The server sees copies of these (the GPU pool's buffers, the CPU arena), never these: they stay as
        # drawn, to compare the copies with and then to compute the reference from (no clone: a KernelBench
        # input takes 6 GiB).
        inputs = self._inputs(task, seed, get_inputs)
        res = session.call(inputs, audit=audit, timeout_s=self._bound(task, s, first))
        out["violations"] += res.violations
        shared = list(session.shared_inputs)
        if res.error:
            return res, None, None
        self._mutation_check(shared, [x for x in inputs if isinstance(x, torch.Tensor)], out)
        self._process_checks(session, s, out, "during a call")
        with torch.no_grad():
            ref = _plain(task.model(*inputs))
        harness.synchronize(self.device)
        if res.early:
            out["violations"].append(("early-answer", res.early))
        big = s.sample_threshold_bytes
        sample_seed = secrets.randbits(63)
        cmp = compare_outputs(
            harness.sample_large(ref, sample_seed, big),
            harness.sample_large(res.outputs, sample_seed, big),
            s.tolerances,
            spread_tol=s.spread_tol,
        )
        trial = TrialFacts(
            seed=seed,
            passed=cmp.passed,
            max_abs_error=cmp.max_abs_error,
            max_rel_error=cmp.max_rel_error,
            message=cmp.message,
            timed=timed,
        )
        res.outputs = None
        return res, trial, ref

    def _timed(
        self,
        task: PreparedTask,
        session: ServerSession,
        s: RunSettings,
        out: dict[str, Any],
        check: bool,
        first_bound_s: float | None = None,
    ) -> dict[str, Any]:
        bound = first_bound_s or self._bound(task, s, True)
        deadline = time.perf_counter() + s.warmup_s
        n = 0
        inputs = self._inputs(task)
        while n < s.warmup or time.perf_counter() < deadline:
            if n < s.warmup:
                inputs = self._inputs(task)
            res = session.call(inputs, timeout_s=bound, keep=False)
            bound = self._bound(task, s, False)
            if res.error:
                out["error"] = f"warm-up call {n + 1}: {res.error}"
                return {"trials": [], "times": [], "raw": [], "events": []}
            n += 1
        trials: list[TrialFacts] = []
        raw: list[float] = []
        events: list[float] = []
        parts: list[dict[str, float]] = []
        new_segments = 0
        busy = 0
        window_ms, most, spent_ms = 1000.0 * s.timed_window_s, max(s.max_timed_calls, s.timed_calls), 0.0
        load_before = cpu_load.snapshot()
        # at least ``timed_calls``; on a GPU more, until the windows add up to ``timed_window_s``
        while len(raw) < s.timed_calls or (len(raw) < most and spent_ms < window_ms):
            if check:
                res, trial, _ = self._checked_call(
                    task, session, s, out, secrets.randbits(63), audit=False, first=False, timed=True
                )
                if trial is not None:
                    trials.append(trial)
            else:
                res = session.call(self._inputs(task), timeout_s=bound)
            if res.error:
                out["error"] = f"timed call {len(raw) + 1}: {res.error}"
                break
            raw.append(res.ms)
            spent_ms += res.ms
            events.append(res.event_ms)
            parts.append(res.parts)
            new_segments += res.new_segments
            busy += res.busy
        load_after = cpu_load.snapshot()
        if raw and busy > max(1, int(BUSY_SHARE * len(raw))):
            out["violations"].append(
                (
                    "gpu-busy",
                    f"in {busy} of {len(raw)} timed calls the GPU was busy with other work before the "
                    "call started: work runs on the GPU outside the calls (a persistent or leftover kernel)",
                )
            )
        if session.idle_cpu_s > IDLE_CPU_S + IDLE_CPU_SHARE * session.idle_wall_s:
            out["violations"].append(
                (
                    "background-work",
                    f"the submission's helper threads used {session.idle_cpu_s:.2f} s of CPU "
                    f"while no call was running ({session.idle_wall_s:.2f} s): work must happen inside forward",
                )
            )
        times = [max(r - session.overhead_ms, session.resolution_ms) for r in raw]
        diagnostics = {
            "overhead_ms": session.overhead_ms,
            "resolution_ms": session.resolution_ms,
            "timed_new_segments": float(new_segments),
            "idle_helper_cpu_s": max(0.0, session.idle_cpu_s),
            "idle_wall_s": session.idle_wall_s,
            "threads_added": float(session.threads() - session.base_threads),
        }
        cores = session.timing_cores
        siblings = {c for core in cores for c in cpu_load.smt_siblings(core)}
        diagnostics.update(cpu_load.timing_load(load_before, load_after, cores, siblings))
        diagnostics.update(_percentiles(raw, "raw_"))
        diagnostics.update(_percentiles(session.noop_trips, "noop_"))
        diagnostics["timed_calls"] = float(len(raw))
        diagnostics.update(_part_medians(parts, ""))
        diagnostics.update(_part_medians(session.noop_parts, "noop_"))
        return {"trials": trials, "times": times, "raw": raw, "events": events, "diagnostics": diagnostics}

    # ------------------------------------------------------------------ trusted checks

    def _mutation_check(self, shared: list[torch.Tensor], drawn: list[torch.Tensor], out: dict[str, Any]) -> None:
        for i, (x, c) in enumerate(zip(shared, drawn)):
            if not _bitwise_equal(x, c):
                out["violations"].append(("input-mutation", f"forward modified input {i} in place; inputs are read-only"))
                return

    def _process_checks(self, session: ServerSession, s: RunSettings, out: dict[str, Any], where: str) -> None:
        kids = session.child_processes()
        if kids:
            out["violations"].append(
                (
                    "process",
                    f"the submission started {len(kids)} process(es) ({where}) that outlive the "
                    "call; work must happen inside forward, in the server's own process",
                )
            )
        extra = session.threads() - session.base_threads
        if extra > s.thread_allowance:
            out["violations"].append(
                (
                    "thread",
                    f"the server gained {extra} OS threads ({where}; {s.thread_allowance} allowed "
                    "for runtime pools); host threads may not run work outside the timed call",
                )
            )

    def _report(self, out: dict[str, Any], session: ServerSession, started: float) -> EvaluationReport:
        seen: set[str] = set()
        violations = []
        for rule, message in out.get("violations", []):
            if rule not in seen:
                seen.add(rule)
                violations.append((str(rule)[:40], str(message)[:500]))
        return EvaluationReport(
            stage=str(out.get("stage", "")),
            error=str(out.get("error", "")),
            import_failed=bool(out.get("import_failed")),
            trials=tuple(out.get("trials", ())),
            times_ms=tuple(out.get("times_ms", ())),
            raw_ms=tuple(out.get("raw_ms", ())),
            event_ms=tuple(out.get("event_ms", ())),
            overhead_ms=session.overhead_ms,
            resolution_ms=session.resolution_ms,
            violations=tuple(violations),
            low_variance=str(out.get("low_variance", "")),
            profile=tuple(out.get("profile", ())),
            killed=bool(session.dead and "time bound" in session.dead) or session.killed_by_limit(),
            diagnostics=dict(out.get("diagnostics", {})),
            sandbox=session.proc.mode if session.proc is not None else "",
            seconds=time.perf_counter() - started,
        )


def _percentiles(values: list[float], prefix: str) -> dict[str, float]:
    """The 10th, 25th, 50th, 75th and 90th percentiles of round trips in ms (diagnostics)."""
    if len(values) < 2:
        return {}
    q = statistics.quantiles(values, n=20)
    return {f"{prefix}p{p}_ms": q[p // 5 - 1] for p in (10, 25, 50, 75, 90)}


def _part_medians(parts: list[dict[str, float]], prefix: str) -> dict[str, float]:
    """The median of each part of the calls (``CallResult.parts``), NaNs left out."""
    names = sorted({name for p in parts for name in p})
    medians = {}
    for name in names:
        values = [p[name] for p in parts if name in p and p[name] == p[name]]
        medians[f"{prefix}{name}_ms"] = statistics.median(values) if values else float("nan")
    return medians


def _plain(out: Any) -> Any:
    """Parameters returned directly become plain tensors (on both sides of the comparison)."""
    if isinstance(out, torch.nn.Parameter):
        return out.detach()
    if isinstance(out, tuple):
        return tuple(_plain(v) for v in out)
    if isinstance(out, list):
        return [_plain(v) for v in out]
    if isinstance(out, dict):
        return {k: _plain(v) for k, v in out.items()}
    return out


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return bool(torch.equal(a.detach().reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))
