"""Bounds a real speedup cannot pass, and the noise that makes a timing unreliable."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

from cuda_gym.judge.config import JudgeConfig
from cuda_gym.judge.messages import TaskFacts
from cuda_gym.judge.result import JudgeResult, Timing, Violation, unresolved


def timing_from(
    times_ms: Sequence[float],
    raw_ms: Sequence[float],
    event_ms: Sequence[float],
    overhead_ms: float,
    resolution_ms: float = 0.0,
) -> Timing:
    """A ``Timing`` of trusted call times (overhead subtracted), with the raw round trips as host times,
    the server's own CUDA-event times (advisory) beside them, and the clock's resolution on its server."""
    timing = Timing.from_calls(list(zip(times_ms, raw_ms or times_ms)))
    events = [e for e in event_ms if e >= 0]
    return replace(
        timing,
        overhead_ms=overhead_ms,
        resolution_ms=resolution_ms,
        event_median_ms=statistics.median(events) if events else math.nan,
    )


def noisy(t: Timing, limit: float) -> bool:
    """Whether a timing is unreliable (``limit`` 0: never): its IQR exceeds ``limit`` of its median, or its
    median is at the clock's resolution (at least half its calls took no time the clock could resolve)."""
    if limit <= 0:
        return False
    return unresolved(t) or (t.median_ms > 0 and t.iqr_ms > limit * t.median_ms)


def noise_note(result: JudgeResult, limit: float) -> str:
    """The sentence that says which timings of a verdict are noisy, or ``""``."""
    names = [
        name
        for name, t in (("candidate", result.candidate), ("eager", result.eager), ("compile", result.compile))
        if t is not None and noisy(t, limit)
    ]
    if not names:
        return ""
    return (
        f"noisy measurement of {', '.join(names)}: the spread (IQR) exceeds {limit:.0%} of the median, or the "
        "median is below the trusted clock's resolution; the speedups rest on unstable timings"
    )


def speed_of_light_ms(facts: TaskFacts, device_name: str, config: JudgeConfig) -> float:
    """max(FLOPs / peak, (input + output bytes) / bandwidth) on this GPU; 0 on the CPU or an unknown GPU."""
    if not config.is_cuda:
        return 0.0
    peak = next((p for model, p in config.peak_table().items() if model in device_name), None)
    if not peak:
        return 0.0
    key = {"float16": "bf16_tflops", "bfloat16": "bf16_tflops", "float32": "tf32_tflops"}.get(facts.dtype, "fp32_tflops")
    tflops = peak.get(key, 0.0)
    t_compute = facts.flops / (tflops * 1e12) if tflops > 0 else 0.0
    bandwidth = peak.get("bandwidth_tbs", 0.0)
    t_memory = (facts.input_bytes + facts.output_bytes) / (bandwidth * 1e12) if bandwidth else 0.0
    return max(t_compute, t_memory) * 1000.0


def implausible(result: JudgeResult, facts: TaskFacts, device_name: str, config: JudgeConfig) -> list[Violation]:
    """``suspect-speedup`` violations: beyond ``max_speedup`` over eager, or below ``sol_factor`` x the floor."""
    found = []
    if config.max_speedup > 0 and result.speedup_vs_eager > config.max_speedup:
        found.append(
            Violation(
                "suspect-speedup",
                f"{result.speedup_vs_eager:.1f}x faster than eager PyTorch is beyond the "
                f"plausible limit ({config.max_speedup:g}x); such results come from skipped work or broken timing",
            )
        )
    floor = speed_of_light_ms(facts, device_name, config)
    if (
        result.candidate is not None
        and not unresolved(result.candidate)  # below the clock's resolution: noise, not a broken timing
        and floor > 0
        and config.sol_factor > 0
        and result.candidate.median_ms < config.sol_factor * floor
    ):
        found.append(
            Violation(
                "suspect-speedup",
                f"median {result.candidate.median_ms:.4f} ms is below {config.sol_factor:g}x "
                f"the speed-of-light floor of {floor:.4f} ms for this task's FLOPs and bytes on this GPU",
            )
        )
    return found
