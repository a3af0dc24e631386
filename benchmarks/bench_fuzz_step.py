"""Fuzz benchmark: 10,000 hostile actions against ``CpuKernel-Builtin-v0``, figures to JSON.

``python3 benchmarks/bench_fuzz_step.py [--actions N] [--seed S] [--judge-rate P]`` plays the actions
of ``tests/fuzz_actions.py`` (random JSON, wrong types, huge arguments, surrogates, nested globs,
catastrophic regexes, escaping paths, links, FIFOs, protected files, binary/forking/sleeping bash)
against one env whose bash calls, globs and greps are capped at ``--limit-s`` (1 s), then judges an
honest episode in the same env. It reports exceptions out of ``step``, the slowest step,
"internal error" observations, peak RSS of the env process and actions per second, and writes them to
``benchmarks/results/fuzz_step_<date>_cpu.json`` (or ``$BENCH_OUT``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

LIMIT_S = 1.0
"""Time limit of each bash call, glob and grep in the fuzz episode (the per-step limit kept small)."""


def run(actions: int = 10_000, seed: int = 2026, judge_rate: float = 0.0,
        limit_s: float = LIMIT_S) -> dict[str, Any]:
    """Play ``actions`` hostile actions, then an honest episode; return the summary."""
    from cuda_gym.errors import CudaGymError
    from env_helpers import CPU_ID, HONEST, TASK_ID, call, play, write_all
    from fuzz_actions import EPISODE_STEPS, HostileActions, fuzz, make_fuzz_env

    with tempfile.TemporaryDirectory() as tmp:
        env = make_fuzz_env(tmp, limit_s)
        try:
            stats = fuzz(env, HostileActions(seed=seed, judge_rate=judge_rate), actions)
            t0 = time.perf_counter()
            try:  # an infrastructure failure of the judge is reported, not mistaken for the fuzz's
                total, info, _ = play(env, [write_all(HONEST.files), call("submit")], options={"task_id": TASK_ID})
                honest_error = ""
            except CudaGymError as exc:
                total, info, honest_error = float("nan"), {}, f"{type(exc).__name__}: {exc}"[:2000]
            honest_s = time.perf_counter() - t0
        finally:
            env.close()
    summary = stats.as_dict()
    summary.update(
        seed=seed, judge_rate=judge_rate, limit_s=limit_s, env_id=CPU_ID, task_id=TASK_ID,
        episode_steps=EPISODE_STEPS, honest_reward=total, honest_correct=bool(info.get("correct")),
        honest_seconds=honest_s, honest_error=honest_error,
        python=platform.python_version(), machine=platform.machine(), cpus=os.cpu_count(),
        date=datetime.date.today().isoformat(),
    )
    return summary


def main() -> None:
    """Command line: run and write the JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--judge-rate", type=float, default=0.0,
                        help="probability of compile/verify/profile/submit per action (seconds each)")
    parser.add_argument("--limit-s", type=float, default=LIMIT_S,
                        help="time limit of each bash call, glob and grep (the tools' defaults are 60, 2 and 5 s)")
    args = parser.parse_args()
    summary = run(args.actions, args.seed, args.judge_rate, args.limit_s)
    default = HERE / "results" / f"fuzz_step_{summary['date']}_cpu.json"
    out = Path(os.environ.get("BENCH_OUT", default))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "examples"}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
