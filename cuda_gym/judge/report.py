"""A readable verdict: the text the CLI prints for a ``JudgeResult``."""

from __future__ import annotations

import math

from cuda_gym.judge.result import JudgeResult, Timing
from cuda_gym.reward import DEFAULT_THRESHOLD, milestone_reward


def _ms(t: Timing | None) -> str:
    if t is None:
        return "not measured"
    return f"{t.median_ms:.4f} ms median (min {t.min_ms:.4f}, IQR {t.iqr_ms:.4f}, {t.trials} calls, {t.source})"


def _x(v: float) -> str:
    return f"{v:.2f}x" if math.isfinite(v) else "n/a"


def summary(result: JudgeResult, threshold: float = DEFAULT_THRESHOLD) -> str:
    """Several lines: verdict, reward, failures, timings and the top kernels."""
    reward = milestone_reward(result, threshold)
    verdict = "PASSED" if result.passed else "FAILED"
    lines = [f"{verdict}  task {result.task_id}  mode {result.mode}  device {result.device}  milestone reward {reward}"]
    if not result.compiled:
        lines.append("compile: FAILED")
        if result.compile_log:
            lines.append(result.compile_log)
    if result.error:
        lines.append(f"error: {result.error}")
    if result.trials:
        passed = sum(t.passed for t in result.trials)
        lines.append(f"correctness: {passed}/{len(result.trials)} checks passed "
                     f"({sum(t.timed for t in result.trials)} of them on timed calls)")
        for t in result.trials:
            if not t.passed:
                lines.append(f"  failed check (seed {t.seed}{', timed call' if t.timed else ''}): {t.message}")
                break
    for v in result.violations:
        lines.append(f"violation: {v}")
    if result.low_variance_output:
        lines.append("note: this task's output barely varies: a constant could pass its tolerance")
    if result.candidate or result.eager or result.compile:
        lines.append(f"candidate: {_ms(result.candidate)}")
        lines.append(f"eager:     {_ms(result.eager)}")
        lines.append(f"compile:   {_ms(result.compile)}")
        lines.append(f"speedup vs eager {_x(result.speedup_vs_eager)}, vs torch.compile {_x(result.speedup_vs_compile)}")
    for title, rows in (("candidate kernels", result.profile), ("eager kernels", result.reference_profile)):
        if rows:
            lines.append(f"{title}:")
            lines.extend(f"  {k.share * 100:5.1f}%  {k.total_ms:9.4f} ms  {k.calls:5d}x  {k.name[:100]}" for k in rows[:10])
    lines.append(f"judged in {result.seconds:.1f} s")
    return "\n".join(lines)
