"""The judge's orchestrator: runs the reference and candidate workers and turns their reports into a verdict.

``Judge`` never imports candidate code and never touches the device itself. Per evaluation it builds
the submission (workspace) or copies it (single file) into a job directory, runs static checks, asks the
reference worker to build the reference model and write its weights, runs the candidate worker in the
sandbox, has the reference worker compare every saved output, fetches (or measures and caches) the
eager and ``torch.compile`` timings, and cross-checks the candidate's timings.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_gym.errors import JudgeError
from cuda_gym.judge.baselines import BaselineCache
from cuda_gym.judge.config import TIMING_METHOD, JudgeConfig
from cuda_gym.judge.pool import ReferenceWorker, package_env
from cuda_gym.judge.result import JudgeResult, KernelStat, Mode, Timing, TrialResult, Violation
from cuda_gym.judge.rules import check_submission
from cuda_gym.paths import cache_dir, write_text_atomic
from cuda_gym.sandbox import Limits, RunResult, Sandbox
from cuda_gym.tasks.task import Task
from cuda_gym.text import clean_output

log = logging.getLogger(__name__)

MODES = ("verify", "profile", "full")
HOST_EPS_MS = 0.05
"""Host time may undercut the event time of the same call only by clock granularity: 50 us + 2%."""
MISMATCH_MIN_MS = 1.0
"""``timing-mismatch`` when the event median is below half the host median and more than this far below."""


@dataclass
class _Sub:
    """A submission prepared for one evaluation."""

    kind: str  # "workspace" | "single"
    static_path: Path
    flavour: str
    source_hash: str
    workspace: Any = None
    solution_path: Path | None = None


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
        self.cache_root = self.config.cache_dir or cache_dir()
        self.baseline_cache = BaselineCache(self.cache_root / "baselines")
        self._lock = threading.RLock()
        self._ref = ReferenceWorker(self.config.device, self.cache_root / "judge" / "logs", self.config.reference_timeout_s)

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

    def evaluate(self, task: Task, *, workspace: Any = None, solution: str | os.PathLike[str] | None = None,
                 mode: Mode = "full") -> JudgeResult:
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
        """
        if mode not in MODES:
            raise JudgeError(f"mode must be one of {MODES}, got {mode!r}")
        if (workspace is None) == (solution is None):
            raise JudgeError("pass exactly one of workspace= (a Workspace) or solution= (a file path or source text)")
        start = time.perf_counter()
        with self._lock:
            job_dir = Path(tempfile.mkdtemp(prefix="cuda_gym_job_", dir=self._work_dir()))
            try:
                sub = self._submission(task, workspace, solution, job_dir)
                key = self._judgement_key(task, sub, mode)
                cached = self._cached_judgement(key)
                if cached is not None:
                    return cached
                result = JudgeResult(task_id=task.id, mode=mode, device=self.config.device)
                run = self._run(task, sub, mode, result, job_dir)
                result.seconds = time.perf_counter() - start
                self._store_judgement(key, result, cacheable=run is None or not _killed(run))
                return result
            finally:
                if not self.config.keep_jobs:
                    shutil.rmtree(job_dir, ignore_errors=True)

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

    def close(self) -> None:
        """Stop the reference worker."""
        self._ref.close()

    def __enter__(self) -> "Judge":
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
                source = str(solution)
            target = job_dir / "solution.py"
            target.write_text(source)
            digest = hashlib.sha256(source.encode()).hexdigest()
            return _Sub("single", target, flavour, digest, solution_path=target)
        if isinstance(workspace, (str, os.PathLike)):
            from cuda_gym.workspace import Workspace

            workspace = Workspace.open(Path(workspace), task, flavour)
        root = Path(workspace.root)
        return _Sub("workspace", root, getattr(workspace, "flavour", flavour), _tree_hash(root), workspace=workspace)

    def _run(self, task: Task, sub: _Sub, mode: Mode, result: JudgeResult, job_dir: Path) -> RunResult | None:
        """Fill ``result``; return the candidate's run (``None`` when the build failed before it)."""
        cfg = self.config
        result.violations.extend(self._static_checks(sub))
        module_path: Path | None = None
        if sub.kind == "workspace":
            tampered = sub.workspace.tampered()
            for rel in tampered:
                result.violations.append(Violation("infra-tamper", f"protected file {rel} was changed or removed; infrastructure files and model.py are read-only", file=str(rel)))
            module_path = self._build(sub, result)
            if module_path is None:
                return None
        facts = self._prepare(task, job_dir)
        result.fingerprint = dict(self._ref.fingerprint)
        spec = self._spec(task, sub, mode, facts, module_path)
        run = self._run_candidate(sub, spec, job_dir, mode)
        result.fingerprint["sandbox"] = run.mode
        report = self._read_report(job_dir, run)
        for v in report.get("violations") or []:
            if isinstance(v, dict) and isinstance(v.get("rule"), str):
                result.violations.append(Violation(v["rule"][:40], str(v.get("message", ""))[:500]))
        stage = str(report.get("stage", ""))
        error = str(report.get("error") or "")
        if sub.kind == "single" and stage == "import" and error:
            result.compiled = False
            result.compile_log = clean_output(error, cfg.output_limit)
            return run
        result.compiled = True
        if error:
            result.error = clean_output(error, cfg.output_limit)
        self._check_outputs(task, report, spec, facts, result, job_dir)
        if error or mode == "verify":
            return run
        self._timings(task, report, spec, facts, run, result)
        if mode == "profile":
            result.profile = [_kernel(k) for k in report.get("profile") or [] if isinstance(k, dict)][:15]
            if result.correct:
                try:
                    answer = self._ref.request({"op": "profile", "code_hash": task.code_hash, "seeds": _seeds(cfg.profile_calls or 1)})
                    result.reference_profile = [_kernel(k) for k in answer.get("profile", [])]
                except JudgeError as exc:
                    log.warning("reference profile failed: %s", exc)
        return run

    def _static_checks(self, sub: _Sub) -> list[Violation]:
        try:
            return list(check_submission(sub.static_path, sub.flavour))
        except Exception as exc:  # noqa: BLE001 - a checker crash must not pass a submission silently
            log.exception("static checks crashed")
            raise JudgeError(f"the static checker failed on this submission: {exc}") from exc

    def _build(self, sub: _Sub, result: JudgeResult) -> Path | None:
        from cuda_gym.build import build_workspace

        # The sources are the agent's: compiled in a sandbox like the compile tool's (no host files in the log).
        built = build_workspace(sub.workspace, self.config.build, sandbox=Sandbox(writable=[]))
        if not built.ok:
            result.compiled = False
            result.compile_log = clean_output(built.log or "the build failed without output", self.config.output_limit)
            return None
        return Path(built.module_path)

    def _prepare(self, task: Task, job_dir: Path | None) -> dict[str, Any]:
        req = {"op": "prepare", "code": task.code, "code_hash": task.code_hash, "init_seed": self.config.init_seed,
               "job_dir": str(job_dir) if job_dir else None}
        return self._ask(task, req)["facts"]

    def _ask(self, task: Task, req: dict[str, Any]) -> dict[str, Any]:
        """Send ``req`` to the reference worker and return its answer; after a failure, retry once.

        A fault restarts the worker, which then holds no task: for every op but ``prepare`` itself,
        ``task`` is prepared again before the retry.
        """
        try:
            return self._ref.request(req)
        except JudgeError:
            if req["op"] != "prepare":
                self._prepare(task, None)
            return self._ref.request(req)

    def _spec(self, task: Task, sub: _Sub, mode: Mode, facts: dict[str, Any], module_path: Path | None) -> dict[str, Any]:
        cfg = self.config
        n_timed = cfg.n_timed
        allowance = cfg.thread_allowance
        if allowance is None:
            allowance = (os.cpu_count() or 1) + 2 if not cfg.is_cuda else 2
        return {
            "task_code": task.code,
            "device": cfg.device,
            "mode": mode,
            "kind": sub.kind,
            "solution_path": str(sub.solution_path) if sub.solution_path else None,
            "workspace_root": str(sub.static_path) if sub.kind == "workspace" else None,
            "module_path": str(module_path) if module_path else None,
            "init_seed": cfg.init_seed,
            "correctness_seeds": _seeds(cfg.correctness_trials),
            "warmup_seeds": _seeds(cfg.warmup) if mode != "verify" else [],
            "warmup_s": cfg.warmup_s,
            "timed_seeds": _seeds(n_timed) if mode != "verify" else [],
            "keep_indices": sorted(secrets.SystemRandom().sample(range(n_timed), cfg.n_checked)) if mode != "verify" else [],
            "profile_seeds": _seeds(cfg.profile_calls) if mode == "profile" else [],
            "output_bytes": int(facts.get("output_bytes", 0)),
            "sample_seed": secrets.randbits(63),
            "sample_threshold_bytes": cfg.sample_threshold_bytes,
            "integer_output": bool(facts.get("integer_output", False)),
            "thread_allowance": allowance,
        }

    def _candidate_timeout(self, sub: _Sub, mode: Mode) -> float:
        cfg = self.config
        timeout = cfg.timeout_s + (cfg.timing_budget_s if mode != "verify" else 0.0)
        return timeout + (cfg.single_file_build_s if sub.kind == "single" else 0.0)

    def _run_candidate(self, sub: _Sub, spec: dict[str, Any], job_dir: Path, mode: Mode) -> RunResult:
        cfg = self.config
        (job_dir / "spec.json").write_text(json.dumps(spec))
        os.chmod(job_dir, 0o777)
        ext_dir = cfg.torch_extensions_dir or (self.cache_root / "judge" / "torch_extensions")
        ext_dir.mkdir(parents=True, exist_ok=True)
        env = {"TORCH_EXTENSIONS_DIR": str(ext_dir), "PYTHONPATH": package_env()["PYTHONPATH"]}
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_HOME", "MAX_JOBS"):
            if var in os.environ:
                env[var] = os.environ[var]
        cmd = [_python(), "-m", "cuda_gym.judge.candidate_worker", str(job_dir)]
        readonly: list[Path] = []
        if sub.kind == "workspace":
            readonly.append(Path(spec["workspace_root"]))
            readonly.append(Path(spec["module_path"]).parent)
        writable = [job_dir] + ([ext_dir] if sub.kind == "single" else [])
        limits = Limits(wall_s=self._candidate_timeout(sub, mode), memory_bytes=cfg.memory_bytes,
                        file_bytes=max(4 * 2**30, 4 * int(spec["output_bytes"])), processes=4096)
        # cuda_gym.sandbox is the only way candidate code is started.
        return Sandbox(writable=writable, readonly=readonly, gpu=cfg.is_cuda).run(cmd, cwd=job_dir, env=env, limits=limits)

    def _read_report(self, job_dir: Path, run: RunResult) -> dict[str, Any]:
        limit = self.config.output_limit
        path = job_dir / "result.json"
        report: dict[str, Any] = {}
        if path.is_file() and path.stat().st_size < 50 * 2**20:
            try:
                loaded = json.loads(path.read_text(errors="replace"))
                if isinstance(loaded, dict):
                    report = loaded
            except ValueError:
                report = {}
        output = clean_output(run.output, limit // 2)
        reason = run.reason or f"exit code {run.returncode}"
        if run.timed_out:
            stage = report.get("stage") if report and not report.get("ok") else _read_stage(job_dir)
            where = f" (it was in the {stage} stage)" if isinstance(stage, str) and stage else ""
            report = {"ok": False, "stage": "timeout", "error": f"the submission was killed: {run.reason or 'wall-time limit reached'}{where}; a kernel or loop never finished. Output:\n{output}",
                      "violations": report.get("violations") or []}
        elif not report:
            report = {"ok": False, "stage": "crash", "error": f"the submission's process died without a report ({reason}): it crashed (e.g. a segfault, abort or os._exit). Output:\n{output}"}
        elif not report.get("ok") and not report.get("error"):
            report["error"] = f"the submission's process failed ({reason}). Output:\n{output}"
        elif report.get("ok") and (run.returncode != 0 or run.reason):
            report["ok"] = False
            report["error"] = f"the submission's process ended abnormally after its run ({reason}). Output:\n{output}"
        return report

    def _check_outputs(self, task: Task, report: dict[str, Any], spec: dict[str, Any], facts: dict[str, Any],
                       result: JudgeResult, job_dir: Path) -> None:
        trials_req: list[dict[str, Any]] = []
        reported = {int(t["seed"]): t for t in report.get("trials") or [] if isinstance(t, dict) and "seed" in t}
        if not report.get("error") or reported:
            for seed in spec["correctness_seeds"]:
                t = reported.get(seed)
                name = Path(str(t["file"])).name if t else f"missing_trial_{seed}"
                if not report.get("error") or t:
                    trials_req.append({"seed": seed, "file": str(job_dir / name), "timed": False})
        kept = {int(k["index"]): k for k in report.get("kept") or [] if isinstance(k, dict) and "index" in k}
        if not report.get("error") and spec["timed_seeds"]:
            for i in spec["keep_indices"]:
                k = kept.get(i)
                name = Path(str(k["file"])).name if k else f"missing_timed_{i}"
                trials_req.append({"seed": spec["timed_seeds"][i], "file": str(job_dir / name), "timed": True})
        if not trials_req:
            return
        max_bytes = 2 * int(facts.get("output_bytes", 0)) + 2**20
        req = {"op": "check", "code_hash": task.code_hash, "trials": trials_req, "tolerances": self.config.tolerances(),
               "max_file_bytes": max_bytes, "sample_seed": spec["sample_seed"],
               "sample_threshold_bytes": spec["sample_threshold_bytes"]}
        answer = self._ask(task, req)
        for t, a in zip(trials_req, answer["trials"]):
            result.trials.append(TrialResult(seed=int(t["seed"]), passed=bool(a["passed"]), max_abs_error=_num(a["max_abs_error"]),
                                             max_rel_error=_num(a["max_rel_error"]), message=str(a.get("message", "")), timed=bool(t["timed"])))
        result.low_variance_output = bool(answer.get("low_variance"))
        if result.low_variance_output:
            log.info("task %s has a low-variance output: %s", task.id, answer["low_variance"])

    def _timings(self, task: Task, report: dict[str, Any], spec: dict[str, Any], facts: dict[str, Any],
                 run: RunResult, result: JudgeResult) -> None:
        cfg = self.config
        times = _valid_times(report.get("times"), len(spec["timed_seeds"]), run.seconds)
        if times is None:
            result.violations.append(Violation("timing-forged", "the timing report of the candidate process is malformed or impossible (wrong count, non-finite, negative or beyond the run's wall time)"))
            return
        result.candidate = Timing.from_calls(times)
        result.timed_seconds = sum(h for _, h in times) / 1000.0
        if result.timed_seconds > run.seconds:
            result.violations.append(Violation("timing-forged", f"the timed calls claim {result.timed_seconds:.3f} s but the whole candidate run took {run.seconds:.3f} s"))
        if cfg.is_cuda:
            under = sum(1 for e, h in times if h < e - (HOST_EPS_MS + 0.02 * e))
            if under > max(1, len(times) // 10):
                result.violations.append(Violation("timing-mismatch", f"in {under} of {len(times)} timed calls the host clock measured less than the device events inside it, which is impossible for honest timing"))
            c = result.candidate
            if c.median_ms < 0.5 * c.host_median_ms and c.host_median_ms - c.median_ms > MISMATCH_MIN_MS:
                result.violations.append(Violation("timing-mismatch", f"device-event median {c.median_ms:.4f} ms is far below the host median {c.host_median_ms:.4f} ms of the same synchronized calls"))
        if not result.correct:
            return
        result.eager, result.compile, compile_error = self._baselines(task, facts)
        if compile_error:
            result.fingerprint["compile_error"] = compile_error[:300]
        if cfg.max_speedup > 0 and result.speedup_vs_eager > cfg.max_speedup:
            result.violations.append(Violation("suspect-speedup", f"{result.speedup_vs_eager:.1f}x faster than eager PyTorch is beyond the plausible limit ({cfg.max_speedup:g}x); such results come from skipped work or broken timing"))
        floor = self._speed_of_light_ms(facts)
        if floor > 0 and cfg.sol_factor > 0 and result.candidate.median_ms < cfg.sol_factor * floor:
            result.violations.append(Violation("suspect-speedup", f"median {result.candidate.median_ms:.4f} ms is below {cfg.sol_factor:g}x the speed-of-light floor of {floor:.4f} ms for this task's FLOPs and bytes on this GPU"))

    def _speed_of_light_ms(self, facts: dict[str, Any]) -> float:
        if not self.config.is_cuda:
            return 0.0
        name = self._ref.device_name
        peak = next((p for model, p in self.config.peak_table().items() if model in name), None)
        if not peak:
            return 0.0
        dtype = str(facts.get("dtype", ""))
        tflops = peak.get("bf16_tflops" if dtype in ("float16", "bfloat16") else "tf32_tflops" if dtype == "float32" else "fp32_tflops", 0.0)
        flops = float(facts.get("flops", 0) or 0)
        nbytes = float(facts.get("input_bytes", 0) or 0) + float(facts.get("output_bytes", 0) or 0)
        t_compute = flops / (tflops * 1e12) if tflops > 0 else 0.0
        t_memory = nbytes / (peak.get("bandwidth_tbs", 0.0) * 1e12) if peak.get("bandwidth_tbs") else 0.0
        return max(t_compute, t_memory) * 1000.0

    def _baseline_path(self, task: Task, facts: dict[str, Any]) -> Path:
        torch_version = self._ref.fingerprint.get("torch", "unknown")
        return self.baseline_cache.path(task.code_hash, self._ref.device_name, torch_version, str(facts.get("dtype", "none")))

    def _baselines(self, task: Task, facts: dict[str, Any]) -> tuple[Timing | None, Timing | None, str]:
        cfg = self.config
        path = self._baseline_path(task, facts)
        with self.baseline_cache.lock(path):
            entry = self.baseline_cache.get(path) if cfg.use_cache else None
            if not self._baseline_complete(entry):
                entry = None  # absent, another timing method, or measured without compile: measure again
            source = "cache"
            if entry is None:
                source = "measured"
                entry = {"eager": self._time_reference(task, "eager")[0], "compile": None, "compile_error": "",
                         "fingerprint": self._ref.fingerprint, "method": TIMING_METHOD, "warmup": cfg.warmup, "warmup_ms": cfg.warmup_ms,
                         "timed_calls": cfg.n_timed}
                if cfg.compile_baseline:
                    entry["compile"], entry["compile_error"] = self._time_reference(task, "compile")
                if cfg.use_cache:
                    self.baseline_cache.put(path, entry)
        eager = Timing(**entry["eager"], source=source) if entry.get("eager") else None
        comp = Timing(**entry["compile"], source=source) if entry.get("compile") and cfg.compile_baseline else None
        return eager, comp, str(entry.get("compile_error") or "")

    def _baseline_complete(self, entry: dict[str, Any] | None) -> bool:
        """Whether a baseline cache entry was timed by this method and holds every timing this config needs
        (compile, or why it failed)."""
        if entry is None or entry.get("method") != TIMING_METHOD:
            return False
        return entry.get("compile") is not None or bool(entry.get("compile_error")) or not self.config.compile_baseline

    def _time_reference(self, task: Task, kind: str) -> tuple[dict[str, Any] | None, str]:
        cfg = self.config
        req = {"op": "time", "code_hash": task.code_hash, "kind": kind, "warmup_seeds": _seeds(cfg.warmup),
               "warmup_s": cfg.warmup_s, "timed_seeds": _seeds(cfg.n_timed)}
        try:
            answer = self._ref.request(req)
        except JudgeError as exc:
            if kind == "eager":
                raise
            self._prepare(task, None)
            return None, str(exc)[:2000]
        timing = answer.get("timing")
        return (dict(timing) if timing else None), str(answer.get("error") or "")

    # ------------------------------------------------------------------ judgement cache

    def _judgement_key(self, task: Task, sub: _Sub, mode: Mode) -> str:
        parts = [task.code_hash, sub.kind, sub.source_hash, self.config.device, self.config.fingerprint(), mode]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()

    def _judgement_path(self, key: str) -> Path:
        return self.cache_root / "judgements" / key[:2] / f"{key}.json"

    def _cached_judgement(self, key: str) -> JudgeResult | None:
        if not self.config.cache_judgements:
            return None
        path = self._judgement_path(key)
        try:
            result = JudgeResult.from_dict(json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("ignoring unreadable judgement cache entry %s: %s", path, exc)
            return None
        result.fingerprint["judgement"] = "cache"
        return result

    def _store_judgement(self, key: str, result: JudgeResult, cacheable: bool) -> None:
        if not self.config.cache_judgements or not cacheable:
            return
        path = self._judgement_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, result.to_json(indent=None))


# ---------------------------------------------------------------------- helpers


def _seeds(n: int) -> list[int]:
    return [secrets.randbits(63) for _ in range(n)]


def _num(x: Any) -> float:
    return math.inf if x is None else float(x)


def _kernel(k: dict[str, Any]) -> KernelStat:
    return KernelStat(name=str(k.get("name", ""))[:200], calls=int(k.get("calls", 0)), total_ms=float(k.get("total_ms", 0.0)), share=float(k.get("share", 0.0)))


def _valid_times(raw: Any, count: int, wall_s: float) -> list[tuple[float, float]] | None:
    if not isinstance(raw, list) or len(raw) != count or count == 0:
        return None
    out = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair)):
            return None
        e, h = float(pair[0]), float(pair[1])
        if not (math.isfinite(e) and math.isfinite(h) and e > 0 and h > 0 and h <= wall_s * 1000.0):
            return None
        out.append((e, h))
    return out


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        try:
            h.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()


def _read_stage(job_dir: Path) -> str:
    try:
        return (job_dir / "stage.txt").read_text()[:40]
    except OSError:
        return ""


def _python() -> str:
    import sys

    return sys.executable


def _killed(run: RunResult) -> bool:
    """Whether a time limit killed the run: such a verdict depends on load, so it is not cached."""
    return run.timed_out or "killed" in run.reason
