"""The reference PPO-for-LLM trainer (``cuda-gym train``): multi-turn, token-level PPO with a critic,
GAE over policy tokens, KL to a reference and optional LoRA, plus the CUDA Agent paper's warm-up
stages (single-turn PPO, rejection fine-tuning, value pretraining).

Modules, in reading order: ``config`` (every setting), ``rollout`` (episodes as tokens),
``losses`` (the PPO arithmetic), ``trainer`` (batches and updates), ``models`` (actor, critic,
reference, checkpoints), ``stages`` (the stages and their chain), ``tiny`` (models, tokenizers
and a toy env built in code), ``cli`` (``cuda-gym train``). Importing this package imports
neither ``torch`` nor ``transformers``; ``run_stage``, ``run_pipeline`` and ``train`` load them.
"""

from typing import Any

from cuda_gym.baselines.ppo_llm.config import STAGE_DEFAULTS, STAGES, TrainConfig, read_config_file, stage_config

__all__ = ["STAGES", "STAGE_DEFAULTS", "TrainConfig", "read_config_file", "run_pipeline", "run_stage", "stage_config",
           "train"]


def __getattr__(name: str) -> Any:
    if name in ("run_pipeline", "run_stage", "train"):
        from cuda_gym.baselines.ppo_llm import stages

        return getattr(stages, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
