"""``cuda-gym eval``: the benchmark harness's command line (its options and the command itself)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

AGENTS = ("replay", "openai", "hf")
"""Agents ``--agent`` names; anything else is read as ``module:factory`` (a custom agent)."""

DESCRIPTION = (
    "Run an agent over a task set of ENV_ID, N episodes at a time; every finished task is appended to "
    "--output at once (a rerun skips finished tasks), then the report is written: Table 1 per level "
    "(pass, faster than eager/compile, geomean speedups), KernelBench fast_p, rewards, hack findings, "
    "plots, and KernelBench's eval_results.json. Definitions: docs/benchmarking.md."
)


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``cuda-gym eval`` (env settings come from ``KernelEnvConfig``)."""
    parser.add_argument("env_id", metavar="ENV_ID", help="a registered multi-turn id, e.g. CpuKernel-Builtin-v0")
    parser.add_argument("--agent", default="replay",
                        help="replay (stored solutions), openai (a chat-completions server), hf (a local model), "
                        "or module:factory, a function task_id -> Agent (default: replay)")
    parser.add_argument("--tasks", default=None, help="comma-separated task ids (default: the solutions' tasks "
                        "with --agent replay, else every task of the env)")
    parser.add_argument("--task-file", default=None, help="a file of task ids: a JSON list or one id a line")
    parser.add_argument("--output", default="eval/results.jsonl", help="JSONL of finished tasks (default: %(default)s)")
    parser.add_argument("--report-dir", default=None, help="report folder (default: beside --output)")
    parser.add_argument("--parallel", type=int, default=1, help="episodes at a time (default: 1)")
    parser.add_argument("--seed", type=int, default=0, help="reset seed of every episode (default: 0)")
    parser.add_argument("--retry-errors", action="store_true", help="rerun tasks whose episode raised")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plots", action="store_true", help="no PNG plots")
    parser.add_argument("--report-only", action="store_true", help="rebuild the report from --output; run nothing")
    replay = parser.add_argument_group("--agent replay")
    replay.add_argument("--solutions", default=None,
                        help="folder of solution folders (each with task.txt or meta.json naming its task); "
                        "default: the shipped demo solution of the env's flavour")
    replay.add_argument("--checks", default="compile,verify,profile",
                        help="tool calls between writing and submit (comma-separated; '' submits at once)")
    chat = parser.add_argument_group("--agent openai / hf")
    chat.add_argument("--model", default=None, help="openai: the served model name (default: $OPENAI_MODEL); "
                      "hf: a hub name or local folder")
    chat.add_argument("--base-url", default=None, help="openai: server URL (default: $OPENAI_BASE_URL)")
    chat.add_argument("--gguf-file", default=None, help="hf: a GGUF file inside --model")
    chat.add_argument("--temperature", type=float, default=None, help="sampling temperature")
    chat.add_argument("--max-tokens", type=int, default=None, help="most tokens of one reply")
    chat.add_argument("--context-tokens", type=int, default=None, help="the model's context length")
    from cuda_gym.options import add_config_options

    settings = parser.add_argument_group("env settings (KernelEnvConfig fields; they override the id's)")
    add_config_options(settings, _env_config_class(), skip=("task_ids", "reward"))


def _env_config_class() -> type:
    from cuda_gym.envs.config import KernelEnvConfig

    return KernelEnvConfig


def _custom_factory(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        from cuda_gym.errors import ConfigError

        raise ConfigError(f"--agent {spec!r}: use replay, openai, hf or module:factory (a function task_id -> Agent)")
    return getattr(importlib.import_module(module_name), attr)


def _agent_factory(args: argparse.Namespace, flavour: str) -> tuple[Any, list[str] | None]:
    """The agent factory of ``--agent`` and, for replay, the tasks that have solutions."""
    from cuda_gym.baselines.agents import (
        HFAgent,
        HFAgentConfig,
        OpenAIAgent,
        OpenAIAgentConfig,
        demo_solution,
        load_solutions,
    )
    from cuda_gym.baselines.evaluate import replay_factory

    if args.agent == "replay":
        if args.solutions:
            solutions = load_solutions(args.solutions)
        else:
            demo = demo_solution(flavour)
            solutions = {demo.task_id: demo}
        checks = [c for c in args.checks.split(",") if c.strip()]
        return replay_factory(solutions, checks), list(solutions)
    chat: dict[str, Any] = {}
    if args.temperature is not None:
        chat["temperature"] = args.temperature
    if args.context_tokens is not None:
        chat["context_tokens"] = args.context_tokens
    if args.agent == "openai":
        if args.max_tokens is not None:
            chat["max_tokens"] = args.max_tokens
        config = OpenAIAgentConfig(model=args.model or "", base_url=args.base_url, **chat)
        return (lambda task_id: OpenAIAgent(config)), None
    if args.agent == "hf":
        if not args.model:
            from cuda_gym.errors import ConfigError

            raise ConfigError("--agent hf needs --model (a hub name or a local folder)")
        if args.max_tokens is not None:
            chat["max_new_tokens"] = args.max_tokens
        loaded = HFAgent.from_pretrained(args.model, gguf_file=args.gguf_file, config=HFAgentConfig(**chat))
        # One model in memory, one conversation per task (so --parallel episodes do not share one).
        return (lambda task_id: HFAgent(loaded.model, loaded.tokenizer, loaded.config)), None
    return _custom_factory(args.agent), None


def run_eval_command(args: argparse.Namespace) -> int:
    """``cuda-gym eval``: run (or resume) the benchmark and print where the report is; 0 when it ran."""
    from cuda_gym.baselines.evaluate import EvalConfig, ResultsFile, evaluate, load_task_file, summarize, write_report
    from cuda_gym.options import config_kwargs
    from cuda_gym.vocab import flavour_of

    env_kwargs = config_kwargs(args)
    if "max_turns" in env_kwargs:
        env_kwargs["max_episode_steps"] = env_kwargs["max_turns"]
    output = Path(args.output)
    report_dir = Path(args.report_dir) if args.report_dir else output.parent
    if args.report_only:
        records = ResultsFile(output).load()
        write_report(records, report_dir, meta={"env_id": args.env_id, "agent": args.agent}, plots=not args.no_plots)
        _print_summary(summarize(records), report_dir)
        return 0
    import gymnasium as gym

    import cuda_gym  # noqa: F401  (registers the ids)

    flavour = env_kwargs.get("device") or gym.spec(args.env_id).kwargs.get("device", "cuda")
    factory, solved = _agent_factory(args, flavour_of(str(flavour)))
    tasks: list[str] | None = None
    if args.tasks:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    elif args.task_file:
        tasks = load_task_file(args.task_file)
    elif solved is not None:
        tasks = solved
    config = EvalConfig(env_id=args.env_id, tasks=tasks, output=output, report_dir=report_dir,
                        parallel=args.parallel, seed=args.seed, env_kwargs=env_kwargs,
                        retry_errors=args.retry_errors, progress=not args.no_progress,
                        plots=not args.no_plots, agent_name=args.agent)
    run = evaluate(factory, config)
    print(f"ran {len(run.ran)} task(s), skipped {len(run.skipped)} already in {output}")
    _print_summary(summarize(run.records), report_dir)
    return 0


def _print_summary(groups: Sequence[Any], report_dir: Path) -> None:
    for g in groups:
        print(f"{g.name}: {g.tasks} tasks, pass {g.passed}, faster than compile {g.faster_than_compile}, "
              f"geomean vs compile {g.geomean_vs_compile:.3g} over {g.geomean_covers}")
    print(f"report: {report_dir / 'report.md'}")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cuda_gym.baselines.evaluate`` (the same as ``cuda-gym eval``)."""
    from cuda_gym.errors import CudaGymError

    parser = argparse.ArgumentParser(prog="cuda-gym eval", description=DESCRIPTION)
    add_eval_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_eval_command(args)
    except CudaGymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
