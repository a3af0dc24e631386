"""The ``cuda-gym`` command line: tasks, data, doctor, judge, baselines, demo, play, eval, train.

Each command is a ``cmd_*`` function taking the parsed arguments and returning an exit code;
``build_parser`` wires them. Only this module prints.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast, get_args

from cuda_gym.errors import ConfigError, CudaGymError
from cuda_gym.options import add_config_options, config_kwargs
from cuda_gym.reward import DEFAULT_THRESHOLD
from cuda_gym.vocab import DEVICES_HELP, FLAVOURS, SIZES

if TYPE_CHECKING:
    from cuda_gym.envs.base import KernelEnvBase
    from cuda_gym.judge import JudgeConfig
    from cuda_gym.tasks import Task
    from cuda_gym.tasks.validate import ValidationConfig
    from cuda_gym.vocab import Size

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``cuda-gym`` command (``--help`` works on each)."""
    parser = argparse.ArgumentParser(
        prog="cuda-gym",
        description="Gymnasium environments in which LLM agents learn to write fast CUDA kernels.",
    )
    sub = _subcommands(parser, "command", "COMMAND")
    # Command groups register themselves below; keep one function per group.
    _add_tasks_commands(sub)
    _add_data_commands(sub)
    _add_doctor_command(sub)
    _add_demo_commands(sub)
    _add_judge_commands(sub)
    _add_eval_command(sub)
    _add_train_command(sub)
    return parser


def _add_train_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``train`` command: the PPO-for-LLM trainer's stages (``cuda_gym.baselines.ppo_llm``)."""
    from cuda_gym.baselines.ppo_llm.cli import DESCRIPTION, add_train_arguments

    train = sub.add_parser("train", help="train an LLM agent: warm-up, rejection fine-tuning, value pretraining, PPO",
                           description=DESCRIPTION)
    add_train_arguments(train)
    train.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    """``cuda-gym train STAGE``: see ``cuda_gym.baselines.ppo_llm.cli``."""
    from cuda_gym.baselines.ppo_llm.cli import run_train_command

    return run_train_command(args)


def _add_eval_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``eval`` command: an agent over a task set, with the benchmark report (``cuda_gym.baselines.evaluate``)."""
    from cuda_gym.baselines.evaluate.cli import DESCRIPTION, add_eval_arguments

    ev = sub.add_parser("eval", help="benchmark an agent over a task set (resumable), with the report",
                        description=DESCRIPTION)
    add_eval_arguments(ev)
    ev.set_defaults(func=cmd_eval)


def cmd_eval(args: argparse.Namespace) -> int:
    """``cuda-gym eval ENV_ID``: see ``cuda_gym.baselines.evaluate.cli``."""
    from cuda_gym.baselines.evaluate.cli import run_eval_command

    return run_eval_command(args)


def _subcommands(
    parser: argparse.ArgumentParser, dest: str, metavar: str = "SUBCOMMAND"
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """A required sub-command of ``parser``, stored in ``args.<dest>``."""
    sub = parser.add_subparsers(dest=dest, metavar=metavar)
    sub.required = True
    return sub


def _add_task_set_args(
    parser: argparse.ArgumentParser,
    *,
    source_choices: Sequence[str] | None,
    source_help: str,
    level_help: str,
    path_help: str,
) -> None:
    """``--source``, ``--level`` (repeatable), ``--path`` and ``--size``: which task set to load."""
    parser.add_argument("--source", choices=source_choices, default="builtin", help=source_help)
    parser.add_argument("--level", type=int, action="append", default=None, help=level_help)
    parser.add_argument("--path", default=None, help=path_help)
    parser.add_argument("--size", choices=SIZES, default="default", help="builtin task size (default: default)")


def _add_demo_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``demo`` and ``play`` commands (a scripted episode; an episode typed by a person)."""
    demo = sub.add_parser(
        "demo",
        help="run one builtin episode with a scripted agent (GPU if present, else CPU)",
        description="Run a whole builtin episode with a scripted agent that writes an honest solution, "
        "compiles, verifies, profiles and submits; print the transcript and the reward. The task is "
        "builtin/diag_matmul (the CUDA Agent paper's case study): torch.diag(d) @ x runs as a full GEMM in "
        "eager PyTorch and torch.compile, the solution scales rows, so it earns reward 3.",
    )
    demo.add_argument("--device", choices=FLAVOURS, default=None,
                      help="device to run on (default: cuda when a GPU is visible, else cpu)")
    demo.add_argument("--quiet", action="store_true", help="print only the reward line")
    demo.set_defaults(func=cmd_demo)
    play = sub.add_parser(
        "play",
        help="play an episode yourself, typing tool calls",
        description="Play an episode of ENV_ID by typing tool calls or shortcuts; input may be piped.",
        epilog=_play_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    play.add_argument("env_id", metavar="ENV_ID", help="a registered id, e.g. CpuKernel-Builtin-v0")
    play.add_argument("--task", default=None, help="task id to play (default: drawn with --seed)")
    play.add_argument("--seed", type=int, default=0, help="reset seed (default 0)")
    from cuda_gym.reward import REWARDS

    # The env's settings, from KernelEnvConfig (imported lazily: the engine does not import envs).
    settings = play.add_argument_group("env settings (KernelEnvConfig fields; they override the id's)")
    add_config_options(settings, _env_config_class(), choices={"reward": REWARDS})
    play.set_defaults(func=cmd_play)


def _env_config_class() -> type:
    from cuda_gym.envs.config import KernelEnvConfig

    return KernelEnvConfig


def _play_help() -> str:
    from cuda_gym.play import PLAY_HELP

    return PLAY_HELP


def cmd_demo(args: argparse.Namespace) -> int:
    """``cuda-gym demo``: a scripted episode; exit code 0 when it scores at least 1."""
    from cuda_gym.baselines.demo import run_demo  # the agents live above the engine: imported here only

    def show(action: str, observation: str) -> None:
        if args.quiet:
            return
        if action:
            print(f"\n>>> action\n{action}")
        print(f"\n<<< observation\n{observation}", flush=True)

    result = run_demo(args.device, on_step=show)
    print(f"\nenv {result.env_id}, task {result.task_id}: {result.steps} steps, reward {result.reward:g} "
          f"(compiled={result.info.get('compiled')}, correct={result.info.get('correct')}, "
          f"speedup_vs_eager={result.info.get('speedup_vs_eager', float('nan')):.3g}, "
          f"speedup_vs_compile={result.info.get('speedup_vs_compile', float('nan')):.3g})")
    return 0 if result.reward >= 1 else 1


def cmd_play(args: argparse.Namespace) -> int:
    """``cuda-gym play ENV_ID``: read shortcuts or tool calls from stdin until the episode ends."""
    import gymnasium as gym

    import cuda_gym  # noqa: F401  (registers the ids)
    from cuda_gym.play import PLAY_HELP, edit_in_editor, parse_play_line, write_action

    kwargs = config_kwargs(args)
    if "max_turns" in kwargs:
        kwargs["max_episode_steps"] = kwargs["max_turns"]
    env = gym.make(args.env_id, **kwargs)
    interactive = sys.stdin.isatty()
    try:
        obs, info = env.reset(seed=args.seed, options={"task_id": args.task} if args.task else None)
        print(obs)
        print(f"\n[task {info.get('task_id')}, {info.get('max_turns')} turns; type h for help]")
        total = 0.0
        while True:
            if interactive:
                print("> ", end="", flush=True)
            line = sys.stdin.readline()
            if not line:
                print("\n[end of input: episode left unfinished]")
                return 0
            command = parse_play_line(line.rstrip("\n"))
            if command.quit:
                print("[quit]")
                return 0
            if command.help:
                print(PLAY_HELP)
                continue
            action = command.action
            if command.needs_body is not None:
                body = []
                for body_line in sys.stdin:
                    if body_line.rstrip("\n") == "EOF":
                        break
                    body.append(body_line)
                action = write_action(command.needs_body, "".join(body))
            elif command.edit is not None:
                ws = cast("KernelEnvBase", env.unwrapped).workspace
                assert ws is not None  # reset made it
                content = edit_in_editor(ws.root, command.edit)
                if content is None:
                    print("[editor failed: nothing written]")
                    continue
                action = write_action(command.edit, content)
            if not action or not action.strip():
                continue
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(reward)
            print(obs)
            if terminated or truncated:
                print(f"\n[episode over: reward {float(reward):g}, milestone {info.get('milestone')}, "
                      f"{'submitted' if terminated else 'turn limit'}]")
                return 0
    finally:
        env.close()


# ------------------------------------------------------------------------- tasks, data, doctor

_GB = 1e9


def _fmt_bytes(n: int | None) -> str:
    """``1.07 GB``-style sizes; ``?`` when unknown."""
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _add_tasks_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``tasks`` group: ``tasks list``, ``show``, ``validate``, ``synthesize`` and ``nearest``."""
    from cuda_gym.tasks.loaders import SOURCES

    tasks = sub.add_parser("tasks", help="list, show, validate, synthesize tasks",
                           description="List, show, validate and synthesize tasks of a task set.")
    tsub = _subcommands(tasks, "tasks_command")
    lst = tsub.add_parser(
        "list",
        help="list tasks with their level and memory need",
        description="List the tasks of a task set: id, level and the bytes of inputs + parameters + "
        "outputs (traced on the meta device; cached, so later runs are fast).",
    )
    _add_task_set_args(lst, source_choices=SOURCES, source_help="task set (default: builtin)",
                       level_help="keep only this level (repeat for several)",
                       path_help="data folder or file (see `cuda-gym data path`)")
    lst.add_argument("--max-mem", type=float, default=None, metavar="GB",
                     help="keep only tasks needing at most GB gigabytes (unknown sizes are dropped)")
    lst.add_argument("--no-facts", action="store_true", help="skip the memory column (no tracing)")
    lst.set_defaults(func=cmd_tasks_list)
    show = tsub.add_parser("show", help="print a task's code and facts",
                           description="Print one task's metadata, memory facts and code.")
    show.add_argument("task_id", metavar="ID", help="e.g. builtin/softmax, kernelbench/L1/23_Softmax, ops6k/00042")
    show.add_argument("--path", default=None, help="data folder or file (custom tasks: their folder)")
    show.add_argument("--size", choices=SIZES, default=None, help="builtin task size")
    show.set_defaults(func=cmd_tasks_show)
    _add_task_pipeline_commands(tsub)


def cmd_tasks_list(args: argparse.Namespace) -> int:
    """``cuda-gym tasks list``: a table of id, level and total bytes."""
    from cuda_gym.tasks import facts_for, load_tasks

    tasks = load_tasks(args.source, path=args.path, level=args.level, size=args.size)
    need_facts = not args.no_facts or args.max_mem is not None
    facts = facts_for(list(tasks), progress=True) if need_facts else {}
    width = max([len(t.id) for t in tasks] + [2])
    print(f"{'id':<{width}}  level  {'total':>10}")
    shown = unknown = 0
    for task in tasks:
        total = facts[task.id].total_bytes if task.id in facts else None
        if args.max_mem is not None:
            if total is None:
                unknown += 1
                continue
            if total > args.max_mem * _GB:
                continue
        shown += 1
        print(f"{task.id:<{width}}  {task.level:>5}  {_fmt_bytes(total) if need_facts else '-':>10}")
    notes = [f"{shown} of {len(tasks)} tasks"]
    if unknown:
        notes.append(f"{unknown} with unknown size left out")
    if tasks.duplicates:
        notes.append(f"{len(tasks.duplicates)} duplicates skipped")
    if tasks.broken:
        notes.append(f"{len(tasks.broken)} broken skipped")
    print("# " + ", ".join(notes), file=sys.stderr)
    return 0


def cmd_tasks_show(args: argparse.Namespace) -> int:
    """``cuda-gym tasks show ID``: metadata, facts and code of one task."""
    import json

    from cuda_gym.tasks import get_task, task_facts

    task = get_task(args.task_id, path=args.path, size=args.size)
    facts = task_facts(task)
    print(f"# {task.id}  (source {task.source}, level {task.level}, code sha256 {task.code_hash[:12]})")
    for key, value in task.meta.items():
        if key != "sizes":
            print(f"# {key}: {json.dumps(value) if not isinstance(value, str) else value}")
    print(f"# inputs {_fmt_bytes(facts.input_bytes)}, parameters {_fmt_bytes(facts.param_bytes)}, "
          f"outputs {_fmt_bytes(facts.output_bytes)}, total {_fmt_bytes(facts.total_bytes)}")
    if facts.input_shapes is not None:
        shapes = ", ".join(f"{s} {d.removeprefix('torch.')}" for s, d in zip(facts.input_shapes, facts.input_dtypes or []))
        print(f"# input shapes: {shapes}")
    if facts.error:
        print(f"# facts incomplete: {facts.error}")
    print()
    print(task.code.rstrip())
    return 0


_SOURCE_HELP = "a task set (builtin, kernelbench, ops6k) or a folder of KernelBench-style .py files"


def _add_task_pipeline_commands(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``tasks validate``, ``tasks synthesize`` and ``tasks nearest`` (``cuda_gym.tasks.validate``,
    ``synthesize``, ``similarity``; see docs/task_pipeline.md)."""
    from cuda_gym.tasks.similarity import DEFAULT_THRESHOLD
    from cuda_gym.tasks.validate import RULES, ValidationConfig

    device_default = {"device": f"cuda:0 if a GPU is visible, else cpu; one of {DEVICES_HELP}"}
    val = tsub.add_parser(
        "validate", help="check every task of a set against the paper's rubric (resumable JSONL report)",
        description="Check each rule (" + ", ".join(RULES) + ") on every task of SOURCE, each task in a "
        "worker process under a time limit; append one JSON line per task to --report as it finishes (a "
        "second run resumes) and print a summary table.")
    val.add_argument("source", metavar="SOURCE", help=_SOURCE_HELP)
    _add_source_options(val)
    val.add_argument("--report", default="validation.jsonl", help="JSONL report to append to (default validation.jsonl)")
    val.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    val.add_argument("--sample", type=int, default=None, metavar="N",
                     help="only N tasks drawn at random (seeded by --sample-seed), validated in the drawn order; "
                     "e.g. for the costly compile rule, or N >= the set's size to shuffle a time-capped run")
    val.add_argument("--sample-seed", type=int, default=0, help="seed of --sample (default 0)")
    val.add_argument("--summary-json", default=None, metavar="PATH", help="also write the summary as JSON here")
    add_config_options(val.add_argument_group("validation settings (ValidationConfig fields)"), ValidationConfig,
                       defaults=device_default)
    val.set_defaults(func=cmd_tasks_validate)

    rep = tsub.add_parser("report", help="the summary table of a validation report",
                          description="Print the summary of a JSONL validation report (several runs merged per task).")
    rep.add_argument("report", metavar="REPORT", help="the JSONL file of `tasks validate`")
    rep.add_argument("--summary-json", default=None, metavar="PATH", help="also write the summary as JSON here")
    rep.add_argument("--limit", type=int, default=10, help="task ids shown per list (default 10)")
    rep.set_defaults(func=cmd_tasks_report)

    syn = tsub.add_parser(
        "synthesize", help="compose fused-operator tasks and keep those that validate",
        description="Stack 1-5 torch operators from a catalogue with shape rules (or let an LLM behind an "
        "OpenAI-compatible endpoint write them) into KernelBench-style task files; every candidate goes "
        "through `tasks validate`, only the passing ones are written to --out.")
    syn.add_argument("--out", required=True, metavar="DIR", help="folder to write the tasks to (load it as a custom set)")
    syn.add_argument("--count", type=int, default=10, help="tasks to write (default 10)")
    syn.add_argument("--seed", type=int, default=0, help="composer seed (default 0): the same seed gives the same tasks")
    syn.add_argument("--size", choices=SIZES, default="default", help="small (CPU-sized) or default (GPU-sized)")
    syn.add_argument("--min-ops", type=int, default=1, help="fewest operators per task (default 1)")
    syn.add_argument("--max-ops", type=int, default=5, help="most operators per task (default 5)")
    syn.add_argument("--max-candidates", type=int, default=None, help="stop after this many candidates (default 10x count)")
    syn.add_argument("--llm-base-url", default=None, metavar="URL",
                     help="compose with a model behind this OpenAI-compatible endpoint (e.g. http://localhost:8000/v1)")
    syn.add_argument("--llm-model", default=None, help="the model name to ask (with --llm-base-url)")
    syn.add_argument("--llm-api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    add_config_options(syn.add_argument_group("validation settings (ValidationConfig fields)"), ValidationConfig,
                       defaults=device_default)
    syn.set_defaults(func=cmd_tasks_synthesize)

    near = tsub.add_parser(
        "nearest", help="the most similar reference task of each task (decontamination)",
        description="For each task of SOURCE, the reference task with the highest normalized-AST similarity "
        "(identifiers and constants normalized; see docs/task_pipeline.md).")
    near.add_argument("source", metavar="SOURCE", help=_SOURCE_HELP)
    _add_source_options(near)
    near.add_argument("--reference", default="kernelbench", help="reference task set or folder (default kernelbench)")
    near.add_argument("--reference-path", default=None, help="data folder or file of the reference set")
    near.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD,
                      help=f"mark tasks at least this similar (default {DEFAULT_THRESHOLD})")
    near.add_argument("--only-above", action="store_true", help="print only tasks at or above --threshold")
    near.add_argument("--json", action="store_true", help="one JSON object per line instead of a table")
    near.set_defaults(func=cmd_tasks_nearest)


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--path", default=None, help="data folder or file of SOURCE (see `cuda-gym data path`)")
    parser.add_argument("--level", type=int, action="append", default=None, help="keep only this level (repeatable)")
    parser.add_argument("--size", choices=SIZES, default="default", help="builtin task size (default: default)")


def _load_source(source: str, path: str | None, level: list[int] | None, size: str) -> list[Task]:
    """The tasks of a SOURCE argument: a task set name, or a folder of task files (``custom``)."""
    from pathlib import Path

    from cuda_gym.errors import TaskError
    from cuda_gym.tasks import SOURCES, load_tasks

    if source in SOURCES and source != "custom":
        return list(load_tasks(source, path=path, level=level, size=cast("Size", size)))
    if Path(source).expanduser().is_dir():
        return list(load_tasks("custom", path=source, level=level))
    raise TaskError(f"SOURCE {source!r} is neither a task set ({', '.join(s for s in SOURCES if s != 'custom')}) "
                    "nor a folder of task files")


def _validation_config(args: argparse.Namespace) -> ValidationConfig:
    from cuda_gym.tasks.validate import ValidationConfig

    return ValidationConfig(**{"device": _default_device(None), **config_kwargs(args)})


def cmd_tasks_validate(args: argparse.Namespace) -> int:
    """``cuda-gym tasks validate SOURCE``: the report and its summary table."""
    import json
    import random

    from cuda_gym.tasks.validate import summarize, validate_tasks

    config = _validation_config(args)
    tasks = _load_source(args.source, args.path, args.level, args.size)
    if args.sample is not None:
        # In the drawn order: a run cut short by a time limit has validated a uniform sample.
        tasks = [tasks[i] for i in random.Random(args.sample_seed).sample(range(len(tasks)), min(args.sample, len(tasks)))]
    if args.limit is not None:
        tasks = tasks[: args.limit]
    print(f"# validating {len(tasks)} tasks on {config.device} ({', '.join(config.rule_list)}), "
          f"{config.jobs} worker(s); report {args.report}", file=sys.stderr)
    records = validate_tasks(tasks, config, report=args.report, progress=True)
    summary = summarize(records)
    print(summary.table())
    if args.summary_json:
        from pathlib import Path

        Path(args.summary_json).write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    return 0


def cmd_tasks_report(args: argparse.Namespace) -> int:
    """``cuda-gym tasks report REPORT``: the summary table of a report."""
    import json
    from pathlib import Path

    from cuda_gym.tasks.validate import read_report, summarize

    summary = summarize(read_report(args.report))
    print(summary.table(limit=args.limit))
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    return 0


def cmd_tasks_synthesize(args: argparse.Namespace) -> int:
    """``cuda-gym tasks synthesize --out DIR``: compose, validate, write the passing tasks."""
    import os

    from cuda_gym.tasks.synthesize import Composer, LLMComposer, RuleComposer, synthesize

    config = _validation_config(args)
    composer: Composer
    if args.llm_base_url:
        if not args.llm_model:
            raise ConfigError("--llm-base-url needs --llm-model (the model name the endpoint serves)")
        composer = LLMComposer(args.llm_base_url, args.llm_model, api_key=os.environ.get(args.llm_api_key_env),
                               seed=args.seed, size=args.size, min_ops=args.min_ops, max_ops=args.max_ops)
    else:
        composer = RuleComposer(args.seed, args.size, args.min_ops, args.max_ops)
    result = synthesize(composer, args.out, args.count, config, max_candidates=args.max_candidates, progress=True)
    for name, rules in sorted(result.rejected.items()):
        print(f"rejected {name}: {', '.join(rules)}")
    print(f"{len(result.written)} tasks in {args.out} ({result.candidates} candidates, {len(result.rejected)} rejected); "
          f"load them with load_tasks('custom', path={args.out!r})")
    return 0 if len(result.written) >= args.count else 1


def cmd_tasks_nearest(args: argparse.Namespace) -> int:
    """``cuda-gym tasks nearest SOURCE``: nearest reference task and similarity of each task."""
    import json

    from cuda_gym.tasks.similarity import ReferenceIndex
    from cuda_gym.tasks.validate import ValidationConfig, reference_items

    tasks = _load_source(args.source, args.path, args.level, args.size)
    refs = reference_items(ValidationConfig(device="cpu", rules="similarity", reference=args.reference,
                                            reference_path=args.reference_path))
    index = ReferenceIndex(refs)
    width = max([len(t.id) for t in tasks] + [4])
    if not args.json:
        print(f"{'task':<{width}}  {'similarity':>10}  nearest")
    above = 0
    for task in tasks:
        ref_id, score = index.nearest(task.code, exclude=task.id)
        above += score >= args.threshold
        if args.only_above and score < args.threshold:
            continue
        if args.json:
            print(json.dumps({"task_id": task.id, "nearest": ref_id, "similarity": round(score, 4)}))
        else:
            mark = "  near-copy" if score >= args.threshold else ""
            print(f"{task.id:<{width}}  {score:>10.3f}  {ref_id}{mark}")
    print(f"# {above} of {len(tasks)} tasks at or above {args.threshold:g} (reference {args.reference}, "
          f"{len(index)} tasks)", file=sys.stderr)
    return 0


def _add_data_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``data`` group: ``data fetch`` and ``data path``."""
    from cuda_gym.data import DATASETS

    data = sub.add_parser("data", help="download data sets and show where they are",
                          description="Download the KernelBench and Ops-6K data sets; show where they are found.")
    dsub = _subcommands(data, "data_command")
    fetch = dsub.add_parser("fetch", help="download a data set from the Hugging Face hub",
                            description="Download a data set into the cache (cuda_gym.paths.cache_dir()/data).")
    fetch.add_argument("name", choices=DATASETS, help="data set")
    fetch.add_argument("--dest", default=None, help="download here instead of the cache")
    fetch.set_defaults(func=cmd_data_fetch)
    path = dsub.add_parser("path", help="show where each data set is found",
                           description="Show the lookup order and where each data set is found, or not.")
    path.add_argument("--path", default=None, help="an explicit data folder to check first")
    path.set_defaults(func=cmd_data_path)


def cmd_data_fetch(args: argparse.Namespace) -> int:
    """``cuda-gym data fetch NAME``."""
    from cuda_gym.data import fetch

    where = fetch(args.name, args.dest)
    print(f"{args.name}: {where}")
    return 0


def _data_status(path: str | None = None) -> list[tuple[str, str]]:
    """(data set, where found or why not) for each downloadable data set."""
    from cuda_gym.data import DATASETS
    from cuda_gym.errors import DataNotFoundError
    from cuda_gym.tasks import find_dataset

    rows = []
    for name in DATASETS:
        try:
            rows.append((name, str(find_dataset(name, path))))
        except DataNotFoundError as exc:
            rows.append((name, f"not found: {exc}"))
    return rows


def cmd_data_path(args: argparse.Namespace) -> int:
    """``cuda-gym data path``: lookup order and where each data set is."""
    from cuda_gym.paths import data_roots

    print("lookup order: " + ", ".join(str(r) for r in data_roots(args.path)))
    for name, where in _data_status(args.path):
        print(f"{name}: {where}")
    return 0


def _add_doctor_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``doctor`` command."""
    doctor = sub.add_parser("doctor", help="check the installation: torch, CUDA, nvcc, sandbox, data",
                            description="Report Python, torch and CUDA versions, GPUs, nvcc, the sandbox "
                            "mode and where the data sets are.")
    doctor.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    """``cuda-gym doctor``: one line per component; exit 0 unless torch is unusable."""
    import platform
    import re
    import shutil
    import subprocess

    print(f"python: {platform.python_version()} ({sys.executable})")
    try:
        import torch
    except ImportError as exc:
        print(f"torch: NOT importable ({exc}); pip install torch")
        return 1
    print(f"torch: {torch.__version__} (built for CUDA {torch.version.cuda or 'none'})")
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            print(f"gpu {i}: {props.name}, {props.total_memory / 2**30:.0f} GiB, sm_{props.major}{props.minor}")
    else:
        print("gpu: none visible (CPU device only: CpuKernel-* envs; compile still works)")
    from cuda_gym.build import find_cuda_home
    from cuda_gym.sandbox import sandbox_mode

    home = find_cuda_home()
    print(f"CUDA_HOME: {home if home else 'not found; set CUDA_HOME to your CUDA toolkit'}")
    nvcc = str(home / "bin" / "nvcc") if home else shutil.which("nvcc")
    if nvcc:
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
            match = re.search(r"release ([\d.]+)", out)
            print(f"nvcc: {nvcc} (release {match.group(1) if match else 'unknown'})")
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"nvcc: {nvcc} does not run ({exc})")
    else:
        print("nvcc: not found; install the CUDA toolkit or set CUDA_HOME")
    print(f"sandbox: {sandbox_mode()}")
    for name, where in _data_status():
        print(f"data {name}: {where}")
    return 0


def _add_judge_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``judge`` command and the ``baselines`` group (``baselines measure``)."""
    from cuda_gym.judge.result import Mode

    judge = sub.add_parser(
        "judge",
        help="verify and time a submission",
        description="Judge a workspace or a KernelBench-style single file (ModelNew) against a task: "
        "correctness on fresh inputs, rules, timing vs eager and torch.compile; prints the verdict and "
        "the milestone reward.",
    )
    judge.add_argument("--task", required=True, metavar="ID", help="task id, e.g. builtin/softmax")
    what = judge.add_mutually_exclusive_group(required=True)
    what.add_argument("--workspace", metavar="DIR", help="a workspace folder (model_new.py, kernels/)")
    what.add_argument("--solution", metavar="FILE", help="a single .py file defining ModelNew (load_inline)")
    judge.add_argument("--mode", choices=get_args(Mode), default="full", help="what to do (default full)")
    judge.add_argument("--path", default=None, help="data folder or file holding the task")
    judge.add_argument("--size", choices=SIZES, default=None, help="builtin task size")
    judge.add_argument("--no-cache", action="store_true",
                       help="ignore the judgement and baseline caches (--no-use-cache --no-cache-judgements)")
    judge.add_argument("--reward-threshold", type=float, default=DEFAULT_THRESHOLD,
                       help=f"speedup the printed milestone reward must beat (default: {DEFAULT_THRESHOLD})")
    judge.add_argument("--json", action="store_true", help="print the JudgeResult as JSON")
    _add_judge_settings(judge)
    judge.set_defaults(func=cmd_judge)

    baselines = sub.add_parser("baselines", help="measure reference timings",
                               description="Eager and torch.compile timings of tasks, cached on disk.")
    bsub = _subcommands(baselines, "baselines_command")
    measure = bsub.add_parser(
        "measure",
        help="fill the baseline cache for a task set (resumable)",
        description="Time eager PyTorch and torch.compile for every task of a set on one device and store "
        "the results in the baseline cache; tasks already cached are skipped, so an interrupted run resumes.",
    )
    _add_task_set_args(measure, source_choices=None, source_help="task set: builtin, kernelbench, ops6k, custom",
                       level_help="keep only this level (repeatable)", path_help="data folder or file")
    measure.add_argument("--limit", type=int, default=None, help="at most this many tasks")
    measure.add_argument("--no-compile", action="store_true", help="time eager only (--no-compile-baseline)")
    measure.add_argument("--prewarm", type=int, default=0, metavar="JOBS",
                         help="first torch.compile the uncached tasks in JOBS compile servers at once, untimed, "
                         "into the inductor cache the compile baselines share (the timed runs then load "
                         "instead of compiling, one task at a time; default 0: off)")
    _add_judge_settings(measure)
    measure.set_defaults(func=cmd_baselines_measure)


def _add_judge_settings(parser: argparse.ArgumentParser) -> None:
    """One option per ``JudgeConfig`` field (``--correctness-trials``, ``--atol '{"float32": 0.02}'``...)."""
    from cuda_gym.judge.config import JudgeConfig

    settings = parser.add_argument_group("judge settings (JudgeConfig fields)")
    add_config_options(settings, JudgeConfig, skip=("build",),
                       defaults={"device": f"cuda:0 if a GPU is visible, else cpu; one of {DEVICES_HELP}"})


def _judge_config(args: argparse.Namespace) -> JudgeConfig:
    """The ``JudgeConfig`` of a command: the device found here and the shortcuts (``--no-cache``,
    ``--no-compile``), overridden by the field options given."""
    from cuda_gym.judge import JudgeConfig

    fields: dict[str, object] = {"device": _default_device(None)}
    if getattr(args, "no_cache", False):
        fields.update(use_cache=False, cache_judgements=False)
    if getattr(args, "no_compile", False):
        fields.update(compile_baseline=False)
    return JudgeConfig(**{**fields, **config_kwargs(args)})


def _default_device(device: str | None) -> str:
    """``device``, else ``cuda:0`` when a GPU is visible, else ``cpu``."""
    if device:
        return device
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def cmd_judge(args: argparse.Namespace) -> int:
    """``cuda-gym judge``: the verdict (or JSON); exit 0 when the submission passed, 1 when not."""
    from pathlib import Path

    from cuda_gym.judge import Judge
    from cuda_gym.judge.report import summary
    from cuda_gym.reward import milestone_reward
    from cuda_gym.tasks import get_task

    task = get_task(args.task, path=args.path, size=args.size)
    config = _judge_config(args)
    with Judge(config) as judge:
        if args.workspace:
            from cuda_gym.workspace import Workspace

            ws = Workspace.open(Path(args.workspace), task, "cuda" if config.is_cuda else "cpu")
            result = judge.evaluate(task, workspace=ws, mode=args.mode)
        else:
            result = judge.evaluate(task, solution=Path(args.solution), mode=args.mode)
    if args.json:
        import json

        data = json.loads(result.to_json())
        data["milestone"] = milestone_reward(result, args.reward_threshold)
        print(json.dumps(data, indent=2))
    else:
        print(summary(result, args.reward_threshold))
    return 0 if result.passed else 1


def cmd_baselines_measure(args: argparse.Namespace) -> int:
    """``cuda-gym baselines measure``: fill the baseline cache with a progress bar; skips cached tasks."""
    from tqdm import tqdm

    from cuda_gym.errors import JudgeError
    from cuda_gym.judge import Judge
    from cuda_gym.tasks import load_tasks

    tasks = list(load_tasks(args.source, path=args.path, level=args.level, size=args.size))
    if args.limit is not None:
        tasks = tasks[: args.limit]
    config = _judge_config(args)
    if args.prewarm < 0:
        raise ConfigError("--prewarm must be >= 0")
    measured = skipped = failed = 0
    with Judge(config) as judge:
        if args.prewarm and config.compile_baseline:
            todo = [t for t in tasks if not judge.baseline_cached(t)]
            errors = judge.prewarm_compile(todo, args.prewarm, progress=True)
            bad = sorted(k for k, v in errors.items() if v)
            print(f"prewarmed torch.compile of {len(todo) - len(bad)} of {len(todo)} tasks"
                  + (f"; failed: {', '.join(bad)[:300]}" if bad else ""), file=sys.stderr)
        bar = tqdm(tasks, desc="baselines", unit="task", file=sys.stderr)
        for task in bar:
            bar.set_postfix_str(task.id[-40:])
            try:
                if judge.baseline_cached(task):
                    skipped += 1
                    continue
                eager, comp, error = judge.baselines(task)
                measured += 1
                note = f" (torch.compile failed: {error[:120]})" if error else ""
                comp_ms = f"{comp.median_ms:.4f}" if comp else "n/a"
                bar.write(f"{task.id}: eager {eager.median_ms if eager else float('nan'):.4f} ms, compile {comp_ms} ms{note}")
            except JudgeError as exc:
                failed += 1
                bar.write(f"{task.id}: FAILED {str(exc).splitlines()[0][:200]}")
    print(f"measured {measured}, already cached {skipped}, failed {failed} (device {config.device})")
    return 0 if failed == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuda-gym`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command = args.func
    try:
        return func(args)
    except CudaGymError as exc:  # every error a user can cause: its message says what to do
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into e.g. `head`: stop quietly like other Unix tools.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
