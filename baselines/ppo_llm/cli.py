"""``cuda-gym train``: one subcommand per stage plus ``pipeline``; every ``TrainConfig`` field is an option."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from cuda_gym.baselines.ppo_llm.config import STAGE_DEFAULTS, STAGES, TrainConfig, read_config_file

DESCRIPTION = (
    "Train an LLM agent on the kernel envs with multi-turn token-level PPO and the CUDA Agent paper's warm-up "
    "stages. Settings come from the field defaults, the stage's defaults, --config (a TOML file: top-level "
    "settings and one [stage] table each) and the options, later ones winning. Guide: docs/training.md."
)

STAGE_HELP = {
    "warmup": "single-turn PPO warm-up (default env CudaKernelSingleTurn-Builtin-v0)",
    "rft": "rejection fine-tuning: collect (and read --rft-trajectories), keep return >= --rft-threshold, SFT",
    "value": "value pretraining: the critic learns on rollouts of the frozen actor",
    "ppo": "multi-turn agentic PPO (default env CudaKernel-Builtin-v0)",
    "pipeline": "run the config's stages in order (default: warmup rft value ppo), each from the previous final/",
}


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``train`` subcommands, each with ``--config``, ``--start`` and every ``TrainConfig`` field."""
    from cuda_gym.options import add_config_options

    sub = parser.add_subparsers(dest="stage", metavar="STAGE")
    sub.required = True
    for stage in (*STAGES, "pipeline"):
        defaults = STAGE_DEFAULTS.get(stage, {})
        p = sub.add_parser(stage, help=STAGE_HELP[stage], description=f"{STAGE_HELP[stage]}. {DESCRIPTION}")
        p.add_argument("--config", type=Path, default=None, metavar="FILE", help="a TOML config file")
        if stage != "pipeline":
            p.add_argument("--start", type=Path, default=None, metavar="CHECKPOINT",
                           help="a checkpoint folder to start from (e.g. runs/x/rft/final; default: the base model)")
        shown = {k: repr(v) if isinstance(v, str) else str(v) for k, v in defaults.items()}
        add_config_options(p.add_argument_group("settings (TrainConfig fields)"), TrainConfig, defaults=shown)


def run_train_command(args: argparse.Namespace) -> int:
    """Run the stage (or the pipeline) the arguments name; print where the final checkpoints are."""
    from cuda_gym.baselines.ppo_llm.config import stage_config
    from cuda_gym.baselines.ppo_llm.stages import run_pipeline, run_stage
    from cuda_gym.options import config_kwargs

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    file = read_config_file(args.config) if args.config else None
    overrides = config_kwargs(args)
    if args.stage == "pipeline":
        finals = run_pipeline(file, overrides)
    else:
        finals = [run_stage(args.stage, stage_config(args.stage, file, overrides), args.start)]
    for final in finals:
        print(f"{final.parent.name}: {final}")
    return 0
