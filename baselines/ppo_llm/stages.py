"""The paper's stages and their chain: warm-up PPO, rejection fine-tuning, value pretraining, PPO.

Each stage runs in ``<output_dir>/<stage>/``: it starts from the previous stage's ``final/``
checkpoint (or the base model), writes ``checkpoint-<step>/`` every ``save_every`` steps and
``final/`` at the end, logs every step to ``metrics.jsonl`` and TensorBoard (``tb/``), and
appends every episode it plays to ``trajectories.jsonl`` (``RecordTrajectories``' format, the
input of a later rejection fine-tuning). With ``resume`` a stage continues from its latest
checkpoint, and a stage that has ``final/`` is skipped.

* ``warmup``: PPO on a single-turn env (``CudaKernelSingleTurn-*``: the answer is a whole solution).
* ``rft``: play ``rft_episodes`` episodes (and read ``rft_trajectories`` files), keep those with a
  return of at least ``rft_threshold``, fine-tune the actor on their reply tokens only.
* ``value``: PPO with the actor frozen: only the critic learns, on the Monte-Carlo returns of the
  rollouts of the fixed policy (verl ``critic_warmup``, OpenRLHF ``freezing_steps``, VAPO).
* ``ppo``: multi-turn agentic PPO, actor and critic.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from cuda_gym.baselines.ppo_llm.config import TrainConfig, stage_config, stage_env_id
from cuda_gym.baselines.ppo_llm.models import (
    BASE_DIR,
    build_models,
    load_tokenizer,
    make_reference,
    random_causal_lm,
    save_checkpoint,
)
from cuda_gym.baselines.ppo_llm.rollout import ChatFormat, Rollout, multi_turn_tools, read_records, trajectory_from_record
from cuda_gym.baselines.ppo_llm.trainer import PPOTrainer, rollout_metrics
from cuda_gym.errors import ConfigError

logger = logging.getLogger(__name__)


class MetricsLogger:
    """Every step's metrics to ``metrics.jsonl`` (always) and TensorBoard (``tb/``, when installed and asked)."""

    def __init__(self, folder: Path, tensorboard: bool) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "metrics.jsonl"
        self.writer: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.writer = SummaryWriter(str(folder / "tb"))
            except ImportError:
                logger.warning("tensorboard is not installed (pip install 'cuda-gym[train]'): metrics go to %s only",
                               self.path)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        clean = {k: (float(v) if v == v else None) for k, v in metrics.items()}  # NaN -> null
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "time": round(time.time(), 3), **clean}) + "\n")
        if self.writer is not None:
            for key, value in clean.items():
                if value is not None:
                    self.writer.add_scalar(key, value, step)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _corpus(config: TrainConfig, env_id: str) -> list[str]:
    """Texts a built-in tokenizer is trained on: the env's prompts, tool schemas and tool calls, and the
    shipped demo solutions (CUDA and C++ code)."""
    import gymnasium as gym

    from cuda_gym.baselines.agents import demo_solution, scripted_actions
    from cuda_gym.tools import tool_schemas

    texts = [json.dumps(tool_schemas())]
    for flavour in ("cuda", "cpu"):
        texts += scripted_actions(demo_solution(flavour))
    env = gym.make(env_id, **config.env_kwargs)
    try:
        tasks = getattr(env.unwrapped, "tasks", None) or [None]
        for i in range(min(len(tasks), 16)):
            obs, _ = env.reset(seed=i)
            texts.append(obs)
    finally:
        env.close()
    return texts


def base_model(config: TrainConfig, env_id: str) -> tuple[str, str | None]:
    """The run's base model (name or folder, GGUF file); ``random`` builds one once under ``output_dir``."""
    if config.model == "":
        raise ConfigError("no model: set model (a hub name, a folder, or random with model_config)")
    if config.model != "random":
        if config.tokenizer == "builtin":
            raise ConfigError('tokenizer = "builtin" goes with model = "random" only (a pretrained model has its own)')
        return config.model, config.gguf_file
    folder = config.output_dir / BASE_DIR
    if not (folder / "config.json").is_file():
        from cuda_gym.baselines.ppo_llm.tiny import bpe_tokenizer

        if config.tokenizer in ("", "builtin"):
            tokenizer = bpe_tokenizer(_corpus(config, env_id), int(config.model_config.get("vocab_size", 4096)))
        else:
            tokenizer = load_tokenizer(config.tokenizer)
        torch.manual_seed(config.seed)
        fields = {k: v for k, v in config.model_config.items() if k != "vocab_size"}
        model = random_causal_lm(fields, tokenizer)
        model.save_pretrained(str(folder))
        tokenizer.save_pretrained(str(folder))
        logger.info("built a random %s model of %.1fM parameters in %s", fields["model_type"],
                    sum(p.numel() for p in model.parameters()) / 1e6, folder)
    return str(folder), None


def _latest_checkpoint(folder: Path) -> Path | None:
    steps = []
    for path in folder.glob("checkpoint-*"):
        match = re.fullmatch(r"checkpoint-(\d+)", path.name)
        if match and (path / "meta.json").is_file():
            steps.append((int(match.group(1)), path))
    return max(steps)[1] if steps else None


def run_stage(stage: str, config: TrainConfig, start: Path | None = None) -> Path:
    """Run one stage (see the module docstring) from checkpoint folder ``start``; returns its ``final/``."""
    folder = config.output_dir / stage
    final = folder / "final"
    if config.resume and (final / "meta.json").is_file():
        logger.info("stage %s already finished (%s): skipped", stage, final)
        return final
    env_id = stage_env_id(config, stage)
    if env_id == "ToolChoice-v0":
        from cuda_gym.baselines.ppo_llm.tiny import register_toy_env

        register_toy_env()
    else:
        import cuda_gym  # noqa: F401  (registers the env ids)
    torch.manual_seed(config.seed)
    base, gguf_file = base_model(config, env_id)
    latest = _latest_checkpoint(folder) if config.resume else None
    origin = latest or start
    models = build_models(config, origin, base, gguf_file)
    trainer = PPOTrainer(config, models, critic_fresh=not (origin is not None and (origin / "critic.pt").is_file()))
    if latest is not None:
        trainer.load_state_dict(torch.load(latest / "trainer.pt", map_location="cpu", weights_only=False))
        logger.info("stage %s resumed from %s (step %d)", stage, latest, trainer.step)
    if stage != "rft":
        make_reference(models, config)
    metrics_log = MetricsLogger(folder, config.tensorboard)
    rollout = Rollout(config, env_id, models, record=folder / "trajectories.jsonl")
    from tqdm import tqdm

    bar = tqdm(total=config.steps, initial=trainer.step, desc=stage, disable=not config.progress, dynamic_ncols=True)
    try:
        while trainer.step < config.steps:
            t0 = time.perf_counter()
            metrics = _rft_step(config, trainer, rollout, env_id) if stage == "rft" else _ppo_step(stage, config,
                                                                                                   trainer, rollout)
            metrics["perf/step_s"] = time.perf_counter() - t0
            metrics["perf/judge_share"] = metrics.get("perf/judge_s", 0.0) / max(metrics["perf/step_s"], 1e-9)
            metrics_log.log(trainer.step, metrics)
            bar.update(1)
            bar.set_postfix(reward=f"{metrics.get('rollout/reward_mean', float('nan')):.2f}",
                            pass_=f"{metrics.get('rollout/pass_rate', float('nan')):.2f}")
            if trainer.step % config.save_every == 0 and trainer.step < config.steps:
                save_checkpoint(models, folder / f"checkpoint-{trainer.step}", config, stage, trainer.step,
                                trainer.state_dict())
    finally:
        bar.close()
        rollout.close()
        metrics_log.close()
    save_checkpoint(models, final, config, stage, trainer.step, None)
    return final


def _ppo_step(stage: str, config: TrainConfig, trainer: PPOTrainer, rollout: Rollout) -> dict[str, float]:
    """One PPO step: collect, batch, update (the critic alone in the ``value`` stage)."""
    trajs, stats = rollout.collect(config.episodes_per_step)
    metrics = rollout_metrics(trajs, stats)
    t0 = time.perf_counter()
    batch = trainer.make_batch(trajs)
    metrics.update(trainer.update(batch, train_actor=stage != "value", train_critic=True))
    metrics["perf/update_s"] = time.perf_counter() - t0
    return metrics


def _rft_step(config: TrainConfig, trainer: PPOTrainer, rollout: Rollout, env_id: str) -> dict[str, float]:
    """One rejection fine-tuning round: collect, add the recorded episodes (first round), filter, SFT."""
    trajs, metrics = [], {}
    if config.rft_episodes > 0:
        trajs, stats = rollout.collect(config.rft_episodes)
        metrics.update(rollout_metrics(trajs, stats))
    if trainer.step == 0 and config.rft_trajectories:
        tokenizer = trainer.models.tokenizer
        eos = int(tokenizer.eos_token_id)
        for record in read_records(config.rft_trajectories):
            tools = record.get("tools") or multi_turn_tools(str(record.get("env_id", env_id)))
            chat = ChatFormat(tokenizer, config.system_prompt, tools if config.pass_tools else [])
            trajs.append(trajectory_from_record(record, chat, eos, config))
    kept = [t for t in trajs if t.reward >= config.rft_threshold and not t.overflow
            and len(t.ids) <= config.max_context_tokens and any(t.mask)]
    metrics.update({"rft/candidates": float(len(trajs)), "rft/kept": float(len(kept))})
    t0 = time.perf_counter()
    if kept:
        metrics.update(trainer.sft(kept, config.rft_epochs))
    else:
        logger.warning("rft round %d: no trajectory reached rft_threshold %g out of %d; nothing to fine-tune on",
                       trainer.step, config.rft_threshold, len(trajs))
    metrics["perf/update_s"] = time.perf_counter() - t0
    trainer.step += 1
    return metrics


def run_pipeline(file: tuple[Mapping[str, Any], Mapping[str, Mapping[str, Any]]] | None = None,
                 overrides: Mapping[str, Any] | None = None, stages: list[str] | None = None) -> list[Path]:
    """Run ``stages`` (default: the config's ``stages``) in order, each from the previous one's ``final/``."""
    first = stage_config("ppo", file, overrides)
    chain = stages or first.stages
    finals: list[Path] = []
    start: Path | None = None
    for stage in chain:
        config = stage_config(stage, file, overrides)
        start = run_stage(stage, config, start)
        finals.append(start)
    return finals


def train(stage: str = "ppo", config: TrainConfig | None = None, start: str | Path | None = None,
          **overrides: Any) -> Path:
    """Run one stage from Python: ``train("ppo", model="...", env_id="...", steps=10)``; returns its ``final/``.

    ``config`` replaces the stage's defaults (``overrides`` still apply); ``start`` is a checkpoint
    folder to begin from (e.g. the previous stage's ``final/``).
    """
    if config is not None:
        from dataclasses import asdict

        overrides = {**asdict(config), **overrides}
    return run_stage(stage, stage_config(stage, None, overrides), Path(start) if start else None)
