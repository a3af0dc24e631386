"""Judge results as text for the agent: verdicts, trials, violations, timings and kernel tables."""

from __future__ import annotations

import math

from cuda_gym.judge.result import JudgeResult, KernelStat, Timing
from cuda_gym.reward import TerminalReward

MAX_TRIAL_ROWS = 12
"""Failing trials listed one per line (passing ones are summarised)."""

MAX_KERNEL_ROWS = 10
"""Rows of each per-kernel table."""

KERNEL_NAME_CHARS = 72
"""Longest kernel name shown (C++ template names are long)."""

def _num(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "inf"
    return f"{x:.3g}"


def _speedup(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}x"


def _headline(result: JudgeResult, what: str) -> str:
    if not result.compiled:
        return f"{what}: FAILED to compile"
    if result.error:
        return f"{what}: FAILED ({result.error.splitlines()[0][:200] if result.error.strip() else 'error'})"
    passed = sum(t.passed for t in result.trials)
    if not result.trials:
        return f"{what}: FAILED (no correctness trial ran)"
    if not result.correct:
        return f"{what}: INCORRECT ({passed}/{len(result.trials)} trials passed)"
    if result.violations:
        return f"{what}: REJECTED (correct, but {len(result.violations)} rule violation(s))"
    return f"{what}: PASSED ({passed}/{len(result.trials)} trials passed)"


def _compile_section(result: JudgeResult) -> list[str]:
    if result.compiled:
        return []
    log = result.compile_log.strip() or "(no compiler output)"
    return ["Compiler output:", log]


def _error_section(result: JudgeResult) -> list[str]:
    if not result.compiled or not result.error:
        return []
    return ["Error:", result.error.strip()]


def _trials_section(result: JudgeResult) -> list[str]:
    if not result.trials:
        return []
    passed = [t for t in result.trials if t.passed]
    worst_abs = max((t.max_abs_error for t in passed), default=math.nan)
    worst_rel = max((t.max_rel_error for t in passed), default=math.nan)
    summary = (f"Correctness trials: {len(passed)}/{len(result.trials)} passed"
               + (f" (worst max_abs_err={_num(worst_abs)}, max_rel_err={_num(worst_rel)})" if passed else ""))
    rows = [summary]
    failed = [(i, t) for i, t in enumerate(result.trials, start=1) if not t.passed]
    for i, t in failed[:MAX_TRIAL_ROWS]:
        kind = " timed" if t.timed else ""
        row = (f"  trial {i}{kind} (seed {t.seed}): FAIL  max_abs_err={_num(t.max_abs_error)} "
               f"max_rel_err={_num(t.max_rel_error)}")
        if t.message:
            row += f"  {t.message.strip()[:300]}"
        rows.append(row)
    if len(failed) > MAX_TRIAL_ROWS:
        rows.append(f"  ... and {len(failed) - MAX_TRIAL_ROWS} more failing trials")
    return rows


def _violations_section(result: JudgeResult) -> list[str]:
    if not result.violations:
        return []
    rows = ["Rule violations (each scores -1):"] + [f"  {v}" for v in result.violations]
    if result.mode != "verify" and result.candidate is None and result.compiled and not result.error:
        rows.append("Not timed: a submission that breaks a rule scores -1 whatever its speed.")
    return rows


def _timing_row(label: str, timing: Timing | None) -> str:
    if timing is None:
        return f"  {label:<13} not measured"
    source = " (cached)" if timing.source == "cache" else ""
    return (f"  {label:<13} {timing.median_ms:10.4f} ms  (min {timing.min_ms:.4f}, IQR {timing.iqr_ms:.4f}, "
            f"{timing.trials} calls){source}")


def _timing_section(result: JudgeResult, reward: TerminalReward | None) -> list[str]:
    if result.candidate is None and result.eager is None and result.compile is None:
        return []
    rows = ["Timing (median per call):",
            _timing_row("candidate", result.candidate),
            _timing_row("eager", result.eager),
            _timing_row("torch.compile", result.compile)]
    target = reward.target() if reward is not None else ""
    rows.append(f"Speedup: {_speedup(result.speedup_vs_eager)} vs eager, "
                f"{_speedup(result.speedup_vs_compile)} vs torch.compile" + (f" ({target})" if target else ""))
    if result.low_variance_output:
        rows.append("Note: the reference output barely varies across inputs on this task.")
    return rows


def _kernel_table(title: str, stats: list[KernelStat]) -> list[str]:
    if not stats:
        return []
    top = sorted(stats, key=lambda s: -s.total_ms)[:MAX_KERNEL_ROWS]
    names = [k.name if len(k.name) <= KERNEL_NAME_CHARS else k.name[: KERNEL_NAME_CHARS - 3] + "..." for k in top]
    width = max(6, *(len(n) for n in names))
    rows = [title, f"  {'kernel':<{width}} {'calls':>6} {'total ms':>10} {'share':>6}"]
    for name, k in zip(names, top):
        rows.append(f"  {name:<{width}} {k.calls:>6} {k.total_ms:>10.4f} {k.share * 100:>5.1f}%")
    if len(stats) > MAX_KERNEL_ROWS:
        rows.append(f"  ... {len(stats) - MAX_KERNEL_ROWS} more")
    return rows


def _join(sections: list[list[str]]) -> str:
    return "\n".join(line for section in sections for line in section)


def _details(result: JudgeResult) -> list[list[str]]:
    """The sections under every verdict: compiler output, error, trials and rule violations."""
    return [_compile_section(result), _error_section(result), _trials_section(result), _violations_section(result)]


def render_verify(result: JudgeResult, reward: TerminalReward | None = None) -> str:
    """Verdict, compiler errors, per-trial pass/fail with max errors, and rule violations.

    ``reward`` is accepted so the three renderers share one signature; a verification has none.
    """
    return _join([[_headline(result, "verify")], *_details(result)])


def render_profile(result: JudgeResult, reward: TerminalReward | None = None) -> str:
    """``render_verify`` plus timings, speedups and the candidate's and reference's kernel tables.

    With the env's ``reward``, the speedup line says what a milestone needs (its threshold).
    """
    return _join([[_headline(result, "profile")], *_details(result), _timing_section(result, reward),
                  _kernel_table("Candidate kernels:", result.profile),
                  _kernel_table("Reference (eager PyTorch) kernels:", result.reference_profile)])


def render_submit(result: JudgeResult, reward: TerminalReward | None = None) -> str:
    """The final judgement: verdict, details, timings and, with the env's ``reward``, its reward line.

    The reward line comes from ``reward.describe(result)``, so the text the agent reads is the
    reward the env pays; without ``reward`` (no env) the judgement carries facts only.
    """
    lines = [reward.describe(result)] if reward is not None else []
    return _join([["Submitted. " + _headline(result, "final judgement")], *_details(result),
                  _timing_section(result, reward), lines])
