"""The judge's orchestrator: static checks, the build, the trusted driver's report, baselines, the verdict.

``Judge`` never imports candidate code and never touches the device itself. Per evaluation it builds
the submission (workspace) or copies it (single file) into a job directory, runs the static checks,
asks the reference worker (the trusted driver) to build the reference and to judge the submission
through a sandboxed candidate server (``cuda_gym.judge.procedure``), fetches (or has the driver
measure and caches) the eager and ``torch.compile`` timings, and applies the plausibility bounds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from cuda_gym.errors import JudgeError
from cuda_gym.judge.baselines import BaselineCache
from cuda_gym.judge.config import TIMING_METHOD, JudgeConfig
from cuda_gym.judge.frozen import FrozenSubmission, freeze
from cuda_gym.judge.judgements import JudgementCache, tree_hash
from cuda_gym.judge.messages import (
    BaselineReport,
    Evaluate,
    EvaluationReport,
    Prepare,
    ProfileReference,
    ProfileReport,
    RunSettings,
    TaskFacts,
    TimeBaseline,
)
from cuda_gym.judge.plausibility import implausible, noise_note, noisy, timing_from
from cuda_gym.judge.result import JudgeResult, KernelStat, Mode, Timing, TrialResult, Violation
from cuda_gym.judge.rules import check_recorded_calls, check_submission
from cuda_gym.judge.worker_client import ReferenceWorker
from cuda_gym.paths import cache_dir
from cuda_gym.sandbox import Sandbox, warn_shared_uid
from cuda_gym.tasks.task import Task
from cuda_gym.text import clean_output, truncate_middle
from cuda_gym.trees import remove_tree

log = logging.getLogger(__name__)

MODES = ("verify", "profile", "full")


@dataclass
class _Sub:
    """A submission prepared for one evaluation."""

    kind: Literal["workspace", "single"]
    static_path: Path
    flavour: str
    source_hash: str
    workspace: Any = None
    """The agent's live workspace (its protected files are checked for tampering)."""
    solution_path: Path | None = None
    frozen: FrozenSubmission | None = None
    """A workspace's frozen copy (``static_path`` is its root): what the rules, the build and the server read."""
    tampered: tuple[str, ...] = ()
    """A workspace's protected files found changed when it was frozen (``Workspace.tampered``)."""


@dataclass
class PreparedJob:
    """A submission after ``Judge.prepare``: checked and built, waiting for the device (or already decided).

    ``result`` holds what the CPU half found (violations, compile status); ``done`` means it is the
    verdict already (a cached judgement or a failed build) and ``Judge.finish`` returns it as it is.
    """

    task: Task
    mode: Mode
    job_dir: Path
    sub: _Sub
    key: str
    result: JudgeResult
    started: float
    module_path: Path | None = None
    inline: tuple[Path, list[Path]] | None = None
    done: bool = False


class Judge:
    """Trusted verification and timing of submissions for one device.

    Args:
        config: a ``JudgeConfig`` (or a dict of its fields); default settings when ``None``.

    ``evaluate`` is the general entry point; ``verify``, ``profile`` and ``submit`` are the tool
    runner's (a workspace in, a ``JudgeResult`` out). One evaluation runs at a time per judge (a lock);
    the reference worker stays alive between evaluations: call ``close()`` (or use ``with``) to stop it.
    """

    def __init__(self, config: JudgeConfig | dict[str, Any] | None = None) -> None:
        self.config = JudgeConfig.from_dict(config)
        warn_shared_uid()
        self.cache_root = self.config.cache_dir or cache_dir()
        self.baseline_cache = BaselineCache(self.cache_root / "baselines")
        self.judgements = JudgementCache(self.cache_root / "judgements", self.config.cache_judgements)
        self._lock = threading.RLock()
        self._ref = ReferenceWorker(
            self.config.device,
            self.cache_root / "judge" / "logs",
            self.config.reference_timeout_s,
            self.cache_root,
            warm_servers=self.config.warm_servers,
        )

    # ------------------------------------------------------------------ public API

    def verify(self, ws: Any) -> JudgeResult:
        """Correctness only (the ``verify`` tool)."""
        return self.evaluate(ws.task, workspace=ws, mode="verify")

    def profile(self, ws: Any) -> JudgeResult:
        """Correctness, timing and a per-kernel profile (the ``profile`` tool)."""
        return self.evaluate(ws.task, workspace=ws, mode="profile")

    def submit(self, ws: Any) -> JudgeResult:
        """The final judgement (mode ``full``)."""
        return self.evaluate(ws.task, workspace=ws, mode="full")

    def evaluate(
        self, task: Task, *, workspace: Any = None, solution: str | os.PathLike[str] | None = None, mode: Mode = "full"
    ) -> JudgeResult:
        """Judge one submission of ``task``.

        Args:
            task: the task (its ``code`` is the reference; the workspace's ``model.py`` is never used).
            workspace: a ``cuda_gym.workspace.Workspace`` (or the path of one, opened with the flavour of
                the device); it is built first (cached).
            solution: a KernelBench-style single file defining ``ModelNew``: a ``Path`` to it, or its
                source text as a ``str``.
            mode: ``verify`` (correctness), ``profile`` (plus timing and profiles) or ``full`` (plus timing).

        Returns a ``JudgeResult``; a candidate's failures (compile error, crash, timeout, wrong output,
        violations) are in it. Raises ``JudgeError`` only when the judge or the reference program fails.
        ``evaluate`` is ``finish(prepare(...))``: an executor runs the two halves on different threads.
        """
        with self._lock:
            return self.finish(self.prepare(task, workspace=workspace, solution=solution, mode=mode))

    def prepare(
        self, task: Task, *, workspace: Any = None, solution: str | os.PathLike[str] | None = None, mode: Mode = "full"
    ) -> PreparedJob:
        """The CPU half of ``evaluate``: the judgement cache, the static rules and the build.

        Never touches the device or the reference worker, so several threads may prepare at once
        (``cuda_gym.executors`` builds the next submissions while a lane times the current one). The
        returned job is ``done`` when its verdict is already known (a cached judgement, a failed build);
        otherwise ``finish`` judges it on the device. Pass every job to ``finish`` (or ``discard``).
        """
        if mode not in MODES:
            raise JudgeError(f"mode must be one of {MODES}, got {mode!r}")
        if (workspace is None) == (solution is None):
            raise JudgeError("pass exactly one of workspace= (a Workspace) or solution= (a file path or source text)")
        start = time.perf_counter()
        job_dir = Path(tempfile.mkdtemp(prefix="cuda_gym_job_", dir=self._work_dir()))
        try:
            sub = self._submission(task, workspace, solution, job_dir)
            key = self._judgement_key(task, sub, mode)
            cached = self.judgements.get(key)
            result = JudgeResult(task_id=task.id, mode=mode, device=self.config.device)
            job = PreparedJob(task, mode, job_dir, sub, key, result, start)
            if cached is not None:
                job.result, job.done = cached, True
            elif not self._build_stage(job):
                job.done = True
                job.result.seconds = time.perf_counter() - start
                # A build stopped at its time limit may be a loaded machine's (many builds at once), not the
                # agent's: that verdict stands for this call but is not kept for the next.
                if "build stopped: it ran past" not in job.result.compile_log:
                    self.judgements.put(key, job.result)
        except BaseException:
            remove_tree(job_dir)
            raise
        if job.done and not self.config.keep_jobs:
            remove_tree(job_dir)
        return job

    def finish(self, job: PreparedJob) -> JudgeResult:
        """The device half of ``evaluate``: the trusted driver's run, baselines and the verdict (cached)."""
        if job.done:
            return job.result
        with self._lock:
            try:
                report = self._device_stage(job)
                job.result.seconds = time.perf_counter() - job.started
                if not _killed(report):  # a verdict the time limit decided depends on load: not kept
                    self.judgements.put(job.key, job.result)
                job.done = True
                return job.result
            finally:
                self.discard(job)

    def discard(self, job: PreparedJob) -> None:
        """Remove a prepared job's directory (``finish`` does; call it for a job that will never finish)."""
        if not self.config.keep_jobs:
            remove_tree(job.job_dir)

    def baselines(self, task: Task) -> tuple[Timing | None, Timing | None, str]:
        """``(eager, compile, compile_error)`` timings of the reference, from the cache or measured now."""
        with self._lock:
            facts = self._prepare(task, None)
            return self._baselines(task, facts)

    def baseline_cached(self, task: Task) -> bool:
        """Whether both baselines of ``task`` are in the cache for this device (prepares the reference)."""
        with self._lock:
            facts = self._prepare(task, None)
            return self._baseline_complete(self.baseline_cache.get(self._baseline_path(task, facts)))

    def prewarm_compile(self, tasks: Sequence[Task], jobs: int = 4, progress: bool = False) -> dict[str, str]:
        """``torch.compile`` each task's reference ahead, ``jobs`` at a time, untimed.

        The compile baseline compiles in its server's first call, on the device's timing lane, one task at a
        time (for a KernelBench set on one GPU, most of a benchmark's time). Here ``jobs`` helper judges run
        compile servers at once, each server exactly as a baseline's (same sandbox, environment and
        program), for one call; their graphs land in the inductor cache the compile servers share
        (``cuda_gym.judge.baselines.inductor_cache``), and a baseline's first call then loads them. Nothing
        is timed or cached as a baseline; run it before timing, not during. Returns ``task id -> error``
        ('' when it compiled; an error here is the baseline's own error later)."""
        from concurrent.futures import ThreadPoolExecutor
        from dataclasses import replace

        if jobs < 1:
            raise JudgeError("prewarm_compile needs jobs >= 1")
        queue = list(tasks)
        if not queue:
            return {}
        cfg = replace(self.config, timed_calls=1, warmup=0, warmup_ms=0.0, timed_window_s=0.0, warm_servers=0,
                      cache_dir=self.cache_root, cache_judgements=False)
        out: dict[str, str] = {}
        lock = threading.Lock()
        helpers = min(jobs, len(queue))
        bar: Any = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(queue), desc="torch.compile prewarm", unit="task")

        def work() -> None:
            with Judge(cfg) as helper:
                while True:
                    with lock:
                        if not queue:
                            return
                        task = queue.pop(0)
                    try:
                        with helper._lock:
                            _, error = helper._time_reference(task, "compile")
                    except JudgeError as exc:
                        error = str(exc)
                    with lock:
                        out[task.id] = truncate_middle(error, 1200)  # a server's traceback ends at its cause
                        if bar is not None:
                            bar.update()

        with ThreadPoolExecutor(helpers) as pool:
            for fut in [pool.submit(work) for _ in range(helpers)]:
                fut.result()
        if bar is not None:
            bar.close()
        return out

    @property
    def worker_pid(self) -> int | None:
        """The pid of the judge's reference worker, the trusted process that runs each evaluation's driver
        (``None`` before its first evaluation, or once it ended)."""
        proc = self._ref.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def close(self) -> None:
        """Stop the reference worker."""
        self._ref.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self._ref.kill()
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------ stages

    def _work_dir(self) -> Path | None:
        if self.config.work_dir is None:
            return None
        self.config.work_dir.mkdir(parents=True, exist_ok=True)
        return self.config.work_dir

    def _submission(self, task: Task, workspace: Any, solution: Any, job_dir: Path) -> _Sub:
        flavour = "cuda" if self.config.is_cuda else "cpu"
        if solution is not None:
            if isinstance(solution, os.PathLike):
                path = Path(solution)
                if not path.is_file():
                    raise JudgeError(f"solution file {path} does not exist: pass the path of a file defining ModelNew")
                source = path.read_text(errors="replace")
            else:
                source = str(solution).encode("utf-8", "replace").decode()  # lone surrogates cannot be written
            target = job_dir / "solution.py"
            target.write_text(source)
            digest = hashlib.sha256(source.encode()).hexdigest()
            return _Sub("single", target, flavour, digest, solution_path=target)
        if isinstance(workspace, (str, os.PathLike)):
            from cuda_gym.workspace import Workspace

            workspace = Workspace.open(Path(workspace), task, flavour)
        tampered = tuple(workspace.tampered())
        frozen = freeze(workspace, job_dir / "submission")
        # What the copy leaves out but the verdict reports (a link, an unreadable file, a tampered protected
        # file) is part of the key: two workspaces with one copy but different findings share no verdict.
        findings = sorted(f"{v.rule}\0{v.file}\0{v.message}" for v in frozen.found) + [f"tampered\0{r}" for r in tampered]
        digest = hashlib.sha256("\0\0".join([tree_hash(frozen.root), *findings]).encode()).hexdigest()
        return _Sub("workspace", frozen.root, workspace.flavour, digest, workspace=workspace, frozen=frozen,
                    tampered=tampered)

    def _build_stage(self, job: PreparedJob) -> bool:
        """Static rules, tamper check and build into ``job``; ``False`` when the build failed (verdict known)."""
        sub, result = job.sub, job.result
        if self.config.static_rules:
            result.violations.extend(self._static_checks(sub))
        if sub.kind == "workspace":
            for rel in sub.tampered:
                result.violations.append(
                    Violation(
                        "infra-tamper",
                        f"protected file {rel} was changed or removed; infrastructure files and model.py are read-only",
                        file=str(rel),
                    )
                )
            job.module_path = self._build(sub, result)
            return job.module_path is not None
        job.inline = self._build_single(sub, job.job_dir, result)
        return job.inline is not None

    def _device_stage(self, job: PreparedJob) -> EvaluationReport:
        """Fill ``job.result`` from the trusted driver's run of a built submission; return its report."""
        task, sub, mode, result, job_dir = job.task, job.sub, job.mode, job.result, job.job_dir
        facts = self._prepare(task, job_dir)
        result.fingerprint = dict(self._ref.fingerprint)
        if result.violations and mode != "verify":
            # A rule already broken scores -1 whatever the speed: the correctness trials still run (the
            # agent's feedback), the timed calls and the baselines do not (device time for nothing).
            mode = "verify"
        baselines: tuple[Timing | None, Timing | None, str] | JudgeError | None = None
        if mode != "verify":
            # From the cache, or measured before any of the candidate's code runs: what a candidate leaves behind
            # would slow the baselines that every later speedup of the task divides (a hot GPU with its clocks
            # down; on the CPU, kernel work that outlives the killed server, such as the teardown of the
            # namespaces of red team 6's X2, dirty pages written back, memory compacted). A reference that
            # cannot be timed is the judge's error only where a speed needs it: a wrong candidate keeps its -1.
            try:
                baselines = self._baselines(task, facts)
            except JudgeError as exc:
                baselines = exc
        report = self._evaluate(task, sub, mode, job_dir, job.module_path, job.inline)
        result.fingerprint["sandbox"] = report.sandbox
        if sub.kind == "single" and report.import_failed:
            result.violations.extend(Violation(r, m) for r, m in report.violations)
            result.compiled = False
            result.compile_log = clean_output(report.error, self.config.output_limit)
            return report
        self._record(report, result)
        if report.error or baselines is None:  # verify mode: no timed calls, no baselines
            return report
        self._judge_speed(facts, result, baselines)
        if mode == "profile":
            result.profile = _kernels(report.profile)[:15]
            if result.correct:
                try:
                    answer = self._ask(
                        task, ProfileReference(code_hash=task.code_hash, calls=self.config.profile_calls or 1), ProfileReport
                    )
                    result.reference_profile = _kernels(answer.rows)
                except JudgeError as exc:
                    log.warning("reference profile failed: %s", exc)
        return report

    def _static_checks(self, sub: _Sub) -> list[Violation]:
        try:
            found = list(sub.frozen.found) if sub.frozen is not None else []
            return found + list(check_submission(sub.static_path, sub.flavour))
        except Exception as exc:  # noqa: BLE001 - a checker crash must not pass a submission silently
            log.exception("static checks crashed")
            raise JudgeError(f"the static checker failed on this submission: {exc}") from exc

    def _build(self, sub: _Sub, result: JudgeResult) -> Path | None:
        from cuda_gym.build import build_workspace

        # The sources are the agent's: compiled in a sandbox like the compile tool's (no host files in the log).
        assert sub.frozen is not None
        built = build_workspace(sub.frozen.workspace, self.config.build, sandbox=Sandbox(writable=[]))
        if not built.ok:
            result.compiled = False
            result.compile_log = clean_output(built.log or "the build failed without output", self.config.output_limit)
            return None
        assert built.module_path is not None
        return Path(built.module_path)

    def _build_single(self, sub: _Sub, job_dir: Path, result: JudgeResult) -> tuple[Path, list[Path]] | None:
        """Record and build a single file's ``load_inline`` calls (content-cached, sandboxed); the manifest
        and the module paths, or ``None`` with ``compiled=False`` and the log when it does not build."""
        from cuda_gym.build.inline import prepare

        assert sub.solution_path is not None
        built = prepare(
            sub.solution_path,
            job_dir,
            sub.flavour,
            self.config.build,
            sandbox=Sandbox(writable=[]),
            timeout_s=self.config.timeout_s,
        )
        if self.config.static_rules:  # what the calls really compile, however Python computed their sources
            try:
                result.violations.extend(check_recorded_calls(built.recording, sub.flavour))
            except Exception as exc:  # noqa: BLE001 - a checker crash must not pass a submission silently
                log.exception("the recorded load_inline calls' check crashed")
                raise JudgeError(f"the static checker failed on this submission's load_inline calls: {exc}") from exc
        if not built.recording.calls and not built.recording.error:
            # No extension at all (a PyTorch-only ModelNew): nothing to build; any later load_inline is refused.
            empty = job_dir / "inline_modules.json"
            empty.write_text("{}")
            return empty, []
        if not built.ok or built.manifest is None:
            result.compiled = False
            result.compile_log = clean_output(built.log or "the build failed without output", self.config.output_limit)
            return None
        return built.manifest, [Path(r.module_path) for r in built.results if r.module_path]

    def _prepare(self, task: Task, job_dir: Path | None) -> TaskFacts:
        req = Prepare(
            code=task.code, code_hash=task.code_hash, init_seed=self.config.init_seed, job_dir=str(job_dir) if job_dir else ""
        )
        return self._ask(task, req, TaskFacts)

    def _ask(self, task: Task, req: Any, expected: type) -> Any:
        """Send ``req`` to the reference worker and return its answer; after a failure, retry once.

        A fault restarts the worker, which then holds no task: for every request but ``Prepare``
        itself, ``task`` is prepared again (into the same job dir) before the retry.
        """
        try:
            return self._ref.request(req, expected)
        except JudgeError:
            if not isinstance(req, Prepare):
                self._prepare(task, Path(getattr(req, "job_dir", "")) if getattr(req, "job_dir", "") else None)
            return self._ref.request(req, expected)

    def _settings(self, sub: _Sub, mode: Mode) -> RunSettings:
        cfg = self.config
        allowance = cfg.thread_allowance
        if allowance is None:
            allowance = (os.cpu_count() or 1) + 2 if not cfg.is_cuda else 2
        load = cfg.timeout_s
        return RunSettings(
            correctness_trials=cfg.correctness_trials,
            warmup=cfg.warmup,
            warmup_s=cfg.warmup_s,
            timed_calls=cfg.n_timed,
            tolerances=cfg.tolerances(),
            sample_threshold_bytes=cfg.sample_threshold_bytes,
            spread_tol=cfg.spread_tol,
            thread_allowance=allowance,
            memory_bytes=cfg.memory_bytes or 0,
            load_timeout_s=load,
            call_timeout_s=cfg.call_timeout_s,
            wall_s=load + cfg.timeout_s + (cfg.timing_budget_s if mode != "verify" else 0.0),
            held_out=cfg.held_out_shapes,
            timed_window_s=cfg.window_s,
            max_timed_calls=cfg.max_timed_calls,
        )

    def _evaluate(
        self,
        task: Task,
        sub: _Sub,
        mode: Mode,
        job_dir: Path,
        module_path: Path | None,
        inline: tuple[Path, list[Path]] | None = None,
    ) -> EvaluationReport:
        readonly = [str(sub.static_path)]
        if module_path is not None:
            readonly.append(str(Path(module_path).parent))
        if inline is not None:
            readonly += [str(inline[0])] + [str(p.parent) for p in inline[1]]
        req = Evaluate(
            code_hash=task.code_hash,
            job_dir=str(job_dir),
            kind=sub.kind,
            mode=mode,
            settings=self._settings(sub, mode),
            solution_path=str(sub.solution_path) if sub.solution_path else "",
            workspace_root=str(sub.static_path) if sub.kind == "workspace" else "",
            module_path=str(module_path) if module_path else "",
            inline_manifest=str(inline[0]) if inline else "",
            readonly=tuple(readonly),
        )
        return self._ask(task, req, EvaluationReport)

    def _record(self, report: EvaluationReport, result: JudgeResult) -> None:
        """The report's trials, violations, error and trusted times, into the result."""
        for rule, message in report.violations:
            result.violations.append(Violation(rule, message))
        result.compiled = True
        if report.error:
            result.error = clean_output(report.error, self.config.output_limit)
        result.trials.extend(
            TrialResult(
                seed=t.seed,
                passed=t.passed,
                max_abs_error=t.max_abs_error,
                max_rel_error=t.max_rel_error,
                message=t.message,
                timed=t.timed,
                held_out=t.held_out,
            )
            for t in report.trials
        )
        result.low_variance_output = bool(report.low_variance)
        result.diagnostics = dict(report.diagnostics)
        if report.times_ms:
            result.candidate = timing_from(
                report.times_ms, report.raw_ms, report.event_ms, report.overhead_ms, report.resolution_ms
            )
            result.timed_seconds = sum(report.raw_ms) / 1000.0

    def _judge_speed(self, facts: TaskFacts, result: JudgeResult,
                     baselines: tuple[Timing | None, Timing | None, str] | JudgeError) -> None:
        """The baselines (taken before the candidate ran; their error is raised here), noise and the
        plausibility bounds of a correct, timed result."""
        if result.candidate is None or not result.correct:
            return
        if isinstance(baselines, JudgeError):
            raise baselines
        result.eager, result.compile, compile_error = baselines
        if compile_error:
            result.fingerprint["compile_error"] = compile_error[:300]
        result.noise = noise_note(result, self.config.noise_iqr)
        result.violations.extend(implausible(result, facts, self._ref.device_name, self.config))

    def _baseline_path(self, task: Task, facts: TaskFacts) -> Path:
        torch_version = self._ref.fingerprint.get("torch", "unknown")
        return self.baseline_cache.path(task.code_hash, self._ref.device_name, torch_version, facts.dtype)

    def _baselines(self, task: Task, facts: TaskFacts) -> tuple[Timing | None, Timing | None, str]:
        cfg = self.config
        path = self._baseline_path(task, facts)
        with self.baseline_cache.lock(path):
            entry = self.baseline_cache.get(path) if cfg.use_cache else None
            if not self._baseline_complete(entry):
                entry = None  # absent, another timing method, or measured without compile: measure again
            source = "cache"
            if entry is None:
                source = "measured"
                entry = self._measure_baselines(task)
                if cfg.use_cache and not entry["noisy"]:
                    self.baseline_cache.put(path, entry)
        eager = Timing(**entry["eager"], source=source) if entry.get("eager") else None
        comp = Timing(**entry["compile"], source=source) if entry.get("compile") and cfg.compile_baseline else None
        return eager, comp, str(entry.get("compile_error") or "")

    def _measure_baselines(self, task: Task) -> dict[str, Any]:
        """Eager and compile timings through the driver; a noisy one is measured once more (not cached if still noisy)."""
        cfg = self.config
        entry: dict[str, Any] = {
            "eager": None,
            "compile": None,
            "compile_error": "",
            "fingerprint": self._ref.fingerprint,
            "method": TIMING_METHOD,
            "warmup": cfg.warmup,
            "warmup_ms": cfg.warmup_ms,
            "timed_calls": cfg.n_timed,
            "timed_window_s": cfg.window_s,
            "noisy": False,
        }
        kinds: list[tuple[str, Literal["reference", "compile"]]] = [("eager", "reference")]
        if cfg.compile_baseline:
            kinds.append(("compile", "compile"))
        for name, kind in kinds:
            timing, error = self._time_reference(task, kind)
            if timing is not None and noisy(Timing(**timing), cfg.noise_iqr):
                timing, error = self._time_reference(task, kind)
                entry["noisy"] = entry["noisy"] or (timing is not None and noisy(Timing(**timing), cfg.noise_iqr))
            if name == "eager" and timing is None:
                raise JudgeError(f"the reference program could not be timed on {cfg.device}: {error}")
            entry[name] = timing
            if name == "compile":
                entry["compile_error"] = error
        return entry

    def _baseline_complete(self, entry: dict[str, Any] | None) -> bool:
        """Whether a baseline cache entry was timed by this method and holds every timing this config needs
        (compile, or why it failed)."""
        if entry is None or entry.get("method") != TIMING_METHOD:
            return False
        return entry.get("compile") is not None or bool(entry.get("compile_error")) or not self.config.compile_baseline

    def _time_reference(self, task: Task, kind: Literal["reference", "compile"]) -> tuple[dict[str, Any] | None, str]:
        job_dir = Path(tempfile.mkdtemp(prefix="cuda_gym_base_", dir=self._work_dir()))
        try:
            self._prepare(task, job_dir)
            sub = _Sub("workspace", job_dir, "cuda" if self.config.is_cuda else "cpu", "")
            req = TimeBaseline(
                code_hash=task.code_hash,
                kind=kind,
                job_dir=str(job_dir),
                settings=self._settings(sub, "full"),
            )
            answer = self._ask(task, req, BaselineReport)
        finally:
            remove_tree(job_dir)
        if answer.error or not answer.times_ms:
            return None, answer.error[:2000] or "no timed calls"
        timing = timing_from(answer.times_ms, answer.raw_ms, answer.event_ms, answer.overhead_ms, answer.resolution_ms)
        return {k: v for k, v in asdict(timing).items() if k != "source"}, ""

    def _judgement_key(self, task: Task, sub: _Sub, mode: Mode) -> str:
        return JudgementCache.key(
            [task.code_hash, sub.kind, sub.source_hash, self.config.device, self.config.fingerprint(), mode]
        )


# ---------------------------------------------------------------------- helpers


def _kernels(rows: Sequence[tuple[str, int, float]]) -> list[KernelStat]:
    total = sum(r[2] for r in rows) or 1.0
    return [KernelStat(name=str(n)[:200], calls=int(c), total_ms=float(t), share=float(t) / total) for n, c, t in rows]


def _killed(report: EvaluationReport | None) -> bool:
    """Whether a time limit killed the server: such a verdict depends on load, so it is not cached."""
    return report is not None and report.killed
