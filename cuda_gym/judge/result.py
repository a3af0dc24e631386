"""The judge's verdict: one dataclass that every reward and observation is a pure function of."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Mode = Literal["verify", "profile", "full"]
"""What an evaluation does: ``verify`` checks correctness only; ``profile`` also times the
candidate and the references and collects a per-kernel profile; ``full`` is the final judgement
(correctness, rules, timing, no profiler overhead)."""


@dataclass(frozen=True)
class Violation:
    """A broken rule or a detected hack: scores -1.

    Attributes:
        rule: short stable name (``torch-compute``, ``input-mutation``, ``infra-tamper``,
            ``timer-patch``, ``thread``, ``stream``, ``tensor-subclass``, ``suspect-speedup``...).
        message: one sentence saying what was found and what the rule is.
        file: the file it was found in, relative to the workspace, when known.
        line: 1-based line number, when known.
    """

    rule: str
    message: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = f" ({self.file}:{self.line})" if self.line else f" ({self.file})"
        return f"[{self.rule}] {self.message}{where}"


@dataclass(frozen=True)
class TrialResult:
    """One correctness check: one fresh input set, one comparison.

    Attributes:
        seed: the seed the inputs were drawn with.
        passed: whether every output matched within tolerance.
        max_abs_error: largest absolute difference over all outputs (``inf`` for NaN/shape errors).
        max_rel_error: largest relative difference.
        message: why it failed (shape, dtype, structure, non-finite, tolerance), empty if passed.
        timed: whether this check was on the output of a timed call.
        held_out: whether the inputs had held-out shapes (``JudgeConfig.held_out_shapes``).
    """

    seed: int
    passed: bool
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    message: str = ""
    timed: bool = False
    held_out: bool = False


@dataclass(frozen=True)
class Timing:
    """Timing of one program (candidate, eager or compile) in milliseconds.

    Attributes:
        median_ms: median over the timed calls.
        min_ms, max_ms: extremes.
        iqr_ms: interquartile range (the spread).
        trials: number of timed calls.
        host_median_ms: median reading of the trusted clock per call (GPU: the driver's events from the
            release to the last sample read, plus the input copy and flush beyond their calibrated bound;
            CPU: its clock from the send to the sample read), before the protocol overhead is subtracted.
        source: ``measured`` or ``cache`` (reference timings come from the on-disk cache).
        overhead_ms: the protocol overhead subtracted from every call (the first quartile of the same
            server's no-op calls, timed alike before the submission loaded).
        event_median_ms: median CUDA-event time the server measured itself: untrusted, for information
            (NaN on the CPU and for baselines).
        resolution_ms: the trusted clock's resolution on that server (half the IQR of its calibration
            round trips); no call's time is taken below it (0 when unknown).
    """

    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    trials: int
    host_median_ms: float = math.nan
    source: str = "measured"
    overhead_ms: float = math.nan
    event_median_ms: float = math.nan
    resolution_ms: float = 0.0

    @classmethod
    def from_calls(cls, calls: Iterable[tuple[float, float]], source: str = "measured") -> Timing:
        """The timing of ``(event_ms, host_ms)`` pairs, one per timed call (see ``timing_stats``)."""
        stats = timing_stats(calls)
        return cls(median_ms=float(stats["median_ms"]), min_ms=float(stats["min_ms"]), max_ms=float(stats["max_ms"]),
                   iqr_ms=float(stats["iqr_ms"]), trials=int(stats["trials"]),
                   host_median_ms=float(stats["host_median_ms"]), source=source)


def timing_stats(calls: Iterable[tuple[float, float]]) -> dict[str, float | int]:
    """``Timing`` fields (all but ``source``) of ``(event_ms, host_ms)`` pairs, one per timed call.

    Median, min, max and interquartile range (``statistics.quantiles``, inclusive method) of the
    event times, the number of calls and the median host time. ``calls`` must not be empty.
    """
    pairs = list(calls)
    ev = sorted(e for e, _ in pairs)
    q = statistics.quantiles(ev, n=4, method="inclusive") if len(ev) >= 2 else [ev[0]] * 3
    return {
        "median_ms": statistics.median(ev),
        "min_ms": ev[0],
        "max_ms": ev[-1],
        "iqr_ms": q[2] - q[0],
        "trials": len(ev),
        "host_median_ms": statistics.median(h for _, h in pairs),
    }


@dataclass(frozen=True)
class KernelStat:
    """One row of a profiler table: a kernel (or op) name with calls, total time and share."""

    name: str
    calls: int
    total_ms: float
    share: float


@dataclass
class JudgeResult:
    """Everything the judge found about one submission on one device.

    Attributes:
        task_id: the task judged.
        mode: what was asked (``verify``, ``profile``, ``full``).
        device: ``cuda:N`` or ``cpu``.
        compiled: the extension built (or the single file imported).
        compile_log: concise compiler output (errors first) when it did not build.
        trials: every correctness check, including checks of timed outputs.
        violations: broken rules and detected hacks; any one scores -1.
        error: why the candidate could not be evaluated (crash, CUDA fault, timeout, OOM), if so.
        candidate, eager, compile: timings (``None`` when not measured).
        low_variance_output: the reference output barely varies across inputs, so a constant
            could pass; users may filter such tasks.
        profile: per-kernel table of the candidate; ``reference_profile`` of eager PyTorch.
        fingerprint: hardware and software facts (GPU name, driver, torch, CUDA, host).
        seconds: wall time of the whole evaluation; ``timed_seconds`` spent in timed calls.
        noise: why the timings are unreliable (a spread beyond ``JudgeConfig.noise_iqr`` of a median),
            else empty (the verdict is cached; noisy baselines are not).
        diagnostics: where the candidate's timed calls spent their round trip (medians in ms of each
            part of ``cuda_gym.judge.driver.CallResult.parts`` as ``<part>_ms``, and of the calibration no-ops as
            ``noop_<part>_ms``; ``overhead_ms``, ``timed_new_segments``): for investigating
            measurements, not part of any verdict.
    """

    task_id: str
    mode: Mode
    device: str
    compiled: bool = False
    compile_log: str = ""
    trials: list[TrialResult] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    error: str = ""
    candidate: Timing | None = None
    eager: Timing | None = None
    compile: Timing | None = None
    low_variance_output: bool = False
    profile: list[KernelStat] = field(default_factory=list)
    reference_profile: list[KernelStat] = field(default_factory=list)
    fingerprint: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    timed_seconds: float = 0.0
    noise: str = ""
    diagnostics: dict[str, float] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        """Compiled, ran without error, every trial passed, at least one trial ran."""
        return self.compiled and not self.error and bool(self.trials) and all(t.passed for t in self.trials)

    @property
    def passed(self) -> bool:
        """Correct and no violation: the submission counts."""
        return self.correct and not self.violations

    @property
    def speedup_vs_eager(self) -> float:
        """Eager median over candidate median; NaN when either is missing, 1.0 when either is unresolved."""
        return _ratio(self.eager, self.candidate)

    @property
    def speedup_vs_compile(self) -> float:
        """``torch.compile`` median over candidate median; NaN when either is missing, 1.0 when either is unresolved."""
        return _ratio(self.compile, self.candidate)

    def to_info(self) -> dict[str, Any]:
        """Flat scalars for a Gymnasium ``info`` dict (vector envs batch them into arrays).

        Facts only: rewards (and ``info["milestone"]``) come from the env's reward settings
        (``cuda_gym.reward.TerminalReward``), never from the judge.
        """
        return {
            "task_id": self.task_id,
            "judge_mode": self.mode,
            "compiled": self.compiled,
            "correct": self.correct,
            "passed": self.passed,
            "violations": len(self.violations),
            "violation": str(self.violations[0]) if self.violations else "",
            "error": self.error,
            "trials_passed": sum(t.passed for t in self.trials),
            "trials": len(self.trials),
            "candidate_ms": self.candidate.median_ms if self.candidate else math.nan,
            "eager_ms": self.eager.median_ms if self.eager else math.nan,
            "compile_ms": self.compile.median_ms if self.compile else math.nan,
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "low_variance_output": self.low_variance_output,
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field plus the derived verdicts."""
        data = asdict(self)
        data.update(
            correct=self.correct,
            passed=self.passed,
            speedup_vs_eager=self.speedup_vs_eager,
            speedup_vs_compile=self.speedup_vs_compile,
        )
        return data

    def to_json(self, indent: int | None = 2) -> str:
        """``to_dict`` as JSON (NaN and inf written as null)."""
        return json.dumps(_finite(self.to_dict()), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeResult:
        """Inverse of ``to_dict`` (derived keys are ignored)."""
        fields = dict(data)
        for key in ("correct", "passed", "speedup_vs_eager", "speedup_vs_compile"):
            fields.pop(key, None)
        fields["trials"] = [TrialResult(**_nan(t)) for t in fields.get("trials", [])]
        fields["violations"] = [Violation(**v) for v in fields.get("violations", [])]
        for key in ("candidate", "eager", "compile"):
            if fields.get(key) is not None:
                fields[key] = Timing(**_nan(fields[key]))
        fields["profile"] = [KernelStat(**k) for k in fields.get("profile", [])]
        fields["reference_profile"] = [KernelStat(**k) for k in fields.get("reference_profile", [])]
        return cls(**fields)


def _ratio(num: Timing | None, den: Timing | None) -> float:
    """``num`` over ``den`` (a baseline over the candidate); 1.0 when either median is at its clock's
    resolution: a time the trusted clock could not resolve supports no claim of speed either way."""
    if num is None or den is None or not den.median_ms > 0:
        return math.nan
    if unresolved(num) or unresolved(den):
        return 1.0
    return num.median_ms / den.median_ms


def unresolved(t: Timing) -> bool:
    """Whether a timing's median is at the trusted clock's resolution (at least half its calls took no time
    the clock could tell from its own overhead)."""
    return t.resolution_ms > 0 and t.median_ms <= t.resolution_ms * (1 + 1e-9)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _nan(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (math.nan if v is None and k.endswith(("_ms", "_error")) else v) for k, v in d.items()}
