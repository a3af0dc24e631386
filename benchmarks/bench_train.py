"""Trainer throughput: what a ``cuda-gym train`` run measured, per stage, as JSON and a short report.

Two commands (``python3 benchmarks/bench_train.py ...``):

- ``demo ENV_ID OUT.jsonl [--episodes N]``: play the shipped honest demo solution (write the files,
  submit) in ``ENV_ID`` under ``RecordTrajectories``: the successful trajectories a rejection
  fine-tuning stage reads (``rft_trajectories``) when the policy itself cannot solve a task yet.
- ``report RUN_DIR [--out DIR]``: read each stage's ``metrics.jsonl`` under ``RUN_DIR`` and write
  ``throughput.json`` and ``REPORT.md``. Per stage: steps, seconds per step, env steps per second,
  generated tokens per second (of generation time), the judge's share of the step time (per turn
  the slowest env's judge time, summed, over the step's wall time), the generation and update
  shares, and the first and last rewards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

STAGES = ("warmup", "rft", "value", "ppo")


def record_demo(env_id: str, out: Path, episodes: int) -> int:
    import gymnasium as gym

    import cuda_gym  # noqa: F401  (registers the ids)
    from cuda_gym.baselines.agents import ReplayAgent, demo_solution, run_episode, scripted_actions
    from cuda_gym.wrappers import RecordTrajectories

    flavour = "cpu" if env_id.startswith("Cpu") else "cuda"
    solution = demo_solution(flavour)
    env = RecordTrajectories(gym.make(env_id, task_ids=[solution.task_id]), out)
    try:
        for i in range(episodes):
            episode = run_episode(env, ReplayAgent(scripted_actions(solution, checks=())), seed=i)
            print(f"demo episode {i}: reward {episode.reward:g} in {episode.steps} steps", flush=True)
    finally:
        env.close()
    return 0


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.fmean(values) if values else None


def summarise(run: Path) -> dict[str, Any]:
    """The per-stage figures of a run folder (stages without metrics are left out)."""
    out: dict[str, Any] = {}
    for stage in STAGES:
        path = run / stage / "metrics.jsonl"
        if not path.is_file():
            continue
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not rows:
            continue
        step_s = sum(r.get("perf/step_s", 0.0) for r in rows)
        share = {name: sum(r.get(f"perf/{name}_s", 0.0) for r in rows) / max(step_s, 1e-9)
                 for name in ("generate", "env", "judge", "update")}
        gen_s = sum(r.get("perf/generate_s", 0.0) for r in rows)
        tokens = sum(r.get("perf/tokens_per_s", 0.0) * r.get("perf/generate_s", 0.0) for r in rows)
        env_steps = sum(r.get("perf/env_steps_per_s", 0.0) * r.get("perf/rollout_s", 0.0) for r in rows)
        out[stage] = {
            "steps": len(rows),
            "seconds_per_step": step_s / len(rows),
            "env_steps_per_s": env_steps / max(step_s, 1e-9),
            "generated_tokens_per_s": tokens / max(gen_s, 1e-9),
            "judge_share": share["judge"],
            "generate_share": share["generate"],
            "env_share": share["env"],
            "update_share": share["update"],
            "reward_first": rows[0].get("rollout/reward_mean"),
            "reward_last": rows[-1].get("rollout/reward_mean"),
            "pass_rate_mean": _mean(rows, "rollout/pass_rate"),
            "value_explained_variance_last": rows[-1].get("value/explained_variance"),
            "kl_ref_last": rows[-1].get("policy/kl_ref"),
            "rft_kept": sum(r.get("rft/kept", 0.0) for r in rows) if stage == "rft" else None,
        }
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def write_report(run: Path, out: Path) -> dict[str, Any]:
    summary = summarise(run)
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.json").write_text(json.dumps(summary, indent=2) + "\n")
    keys = ("steps", "seconds_per_step", "env_steps_per_s", "generated_tokens_per_s", "judge_share",
            "generate_share", "update_share", "reward_first", "reward_last", "pass_rate_mean")
    lines = [f"# Trainer run {run}", "", "| stage | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for stage, row in summary.items():
        lines.append(f"| {stage} | " + " | ".join(_fmt(row[k]) for k in keys) + " |")
    lines += ["", "judge_share: per turn the slowest env's judge time, summed over the step, divided by the "
              "step's wall time (the judge's part of the critical path)."]
    (out / "REPORT.md").write_text("\n".join(lines) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="record the demo solution's episodes (RecordTrajectories JSONL)")
    demo.add_argument("env_id")
    demo.add_argument("out", type=Path)
    demo.add_argument("--episodes", type=int, default=1)
    report = sub.add_parser("report", help="throughput.json and REPORT.md of a run folder")
    report.add_argument("run", type=Path)
    report.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return record_demo(args.env_id, args.out, args.episodes)
    summary = write_report(args.run, args.out or args.run)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
