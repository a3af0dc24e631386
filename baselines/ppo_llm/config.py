"""TrainConfig: every setting of the trainer, one documented field each (also a ``cuda-gym train`` option).

A run is a chain of stages (``STAGES``) that share one config. A TOML file holds the shared
settings at its top level and per-stage overrides in a table named after the stage::

    model = "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    output_dir = "runs/qwen"
    stages = ["warmup", "rft", "value", "ppo"]

    [warmup]
    steps = 20

    [ppo]
    env_kwargs = { max_turns = 20 }

What a stage runs with is: the field defaults, then ``STAGE_DEFAULTS[stage]``, then the file's
top level, then the file's ``[stage]`` table, then the command-line options. Unknown keys are an
error that lists the valid ones.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cuda_gym.baselines.agents.chat import SYSTEM_PROMPT
from cuda_gym.errors import ConfigError

Stage = Literal["warmup", "rft", "value", "ppo"]
STAGES: tuple[str, ...] = ("warmup", "rft", "value", "ppo")
"""The CUDA Agent paper's stages, in pipeline order: single-turn PPO warm-up, rejection fine-tuning,
value pretraining (actor frozen), multi-turn agentic PPO."""

STAGE_DEFAULTS: dict[str, dict[str, Any]] = {
    "warmup": {"env_id": "CudaKernelSingleTurn-Builtin-v0", "steps": 20},
    "rft": {"env_id": "CudaKernel-Builtin-v0", "steps": 1},
    "value": {"env_id": "CudaKernel-Builtin-v0", "steps": 20},
    "ppo": {"env_id": "CudaKernel-Builtin-v0", "steps": 150},
}
"""What each stage changes from the field defaults (the file and the command line override these).
The paper's multi-turn PPO ran 150 steps; ``rft`` counts rounds of collect-then-fine-tune."""


@dataclass
class TrainConfig:
    """Settings of one stage of :func:`cuda_gym.baselines.ppo_llm.train` (and of ``cuda-gym train``).

    Defaults follow verl where the reference frameworks disagree (rl_stack.md section 4.1); the
    docstring of a field names the other frameworks' values where they differ.
    """

    # -- model ------------------------------------------------------------------------------------
    model: str = ""
    """The policy: a Hugging Face hub name or a local folder (``save_pretrained`` output), or
    ``random`` for a randomly initialised model built from ``model_config`` (no download)."""
    gguf_file: str | None = None
    """A GGUF file inside ``model`` to load (``transformers`` ``gguf_file=``; needs ``gguf``)."""
    model_config: dict[str, Any] = field(default_factory=dict)
    """With ``model = "random"``: the ``transformers`` config fields (``model_type`` first, e.g.
    ``{"model_type": "qwen2", "hidden_size": 256, "num_hidden_layers": 4}``)."""
    tokenizer: str = ""
    """Tokenizer name or folder; ``""`` uses ``model``'s; ``builtin`` trains a byte-level BPE in code
    on the env's prompts (for ``model = "random"``; no download)."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Weights' dtype; ``auto``: bfloat16 on a GPU with LoRA (frozen base), else float32 (full
    fine-tuning keeps float32 weights and computes in bfloat16 under ``mixed_precision``)."""
    device: str = "auto"
    """``cuda``, ``cuda:N`` or ``cpu``; ``auto`` takes the first GPU if one is visible."""
    mixed_precision: bool = True
    """bfloat16 autocast for the forward passes on a GPU (ignored on the CPU)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (long contexts on big models)."""
    lora_rank: int = 0
    """LoRA rank of the actor (0: full fine-tuning). With LoRA the KL reference is the base with the
    adapters disabled (TRL's ``null_ref_context``); verl ``lora_rank`` 0, ``lora_alpha`` 16."""
    lora_alpha: int = 16
    """LoRA scaling numerator (``peft`` ``lora_alpha``)."""
    lora_target_modules: str = "all-linear"
    """Modules that get adapters: ``all-linear`` or comma-separated names (``q_proj,v_proj``)."""
    critic: Literal["separate", "shared"] = "separate"
    """``separate``: the critic is its own copy of the backbone plus a value head (verl, OpenRLHF);
    ``shared``: a second LoRA adapter (``critic``) on the actor's frozen base plus the head (needs
    ``lora_rank`` > 0; one copy of the weights in memory)."""

    # -- environment and rollouts -----------------------------------------------------------------
    env_id: str = ""
    """The env to train on; ``""`` takes the stage's default (``STAGE_DEFAULTS``)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """``gym.make`` settings passed through (``task_ids``, ``max_turns``, ``executor``, ``judge``...)."""
    episodes_per_step: int = 8
    """Episodes collected per PPO step (the rollout batch)."""
    num_envs: int = 8
    """Envs played at once (one thread each for their steps; their generations are batched)."""
    max_context_tokens: int = 8192
    """Most tokens of a whole episode (prompt, replies, observations); reaching it ends the episode
    as a failure (``overflow_reward``, no bootstrap)."""
    max_prompt_tokens: int = 4096
    """The first observation (the task prompt) is cut in the middle to this many tokens."""
    max_obs_tokens: int = 1024
    """Each later observation is cut in the middle to this many tokens (verl: 256 for tool output)."""
    max_new_tokens: int = 1024
    """Most tokens of one reply."""
    temperature: float = 1.0
    """Sampling temperature; the training forward divides its logits by it too (same policy)."""
    top_p: float = 1.0
    """Nucleus sampling (1.0 samples the full distribution, as verl's rollouts do: PPO's ratio assumes it)."""
    top_k: int = 0
    """Top-k sampling (0: off)."""
    system_prompt: str | None = SYSTEM_PROMPT
    """The system message (the chat agents' default); ``None`` sends none."""
    pass_tools: bool = True
    """Give the env's tool schemas to the chat template (``tools=``), as ``HFAgent`` does."""
    overflow_reward: float = -1.0
    """Reward of an episode that overflowed ``max_context_tokens`` (the milestone reward's failure)."""
    seed: int = 0
    """Seed of torch and of the episodes' ``reset`` seeds."""

    # -- PPO --------------------------------------------------------------------------------------
    steps: int = 150
    """PPO steps of the stage (a rollout batch and its updates each); ``rft``: collect-and-fine-tune rounds."""
    actor_lr: float = 1e-6
    """Actor AdamW learning rate (verl, OpenRLHF: 1e-6 full fine-tuning; use 1e-5 to 5e-5 with LoRA)."""
    critic_lr: float = 1e-5
    """Critic AdamW learning rate (verl 1e-5, OpenRLHF 9e-6)."""
    weight_decay: float = 0.0
    """AdamW weight decay of both optimizers."""
    ppo_epochs: int = 1
    """Passes over each rollout batch (verl 1, TRL 4)."""
    minibatches: int = 1
    """Optimizer steps per epoch: the batch's episodes are split into this many minibatches."""
    micro_batch_size: int = 1
    """Episodes per forward pass (gradients accumulate over a minibatch's micro-batches)."""
    clip_low: float = 0.2
    """PPO clip below 1 (verl, OpenRLHF, TRL: 0.2)."""
    clip_high: float = 0.2
    """PPO clip above 1 (0.28 is DAPO's clip-higher)."""
    dual_clip: float | None = 3.0
    """Dual-clip bound ``c`` for negative advantages (verl ``clip_ratio_c`` 3.0); ``None`` disables it."""
    value_clip: float | None = 0.5
    """Value clipping around the rollout's values (verl, OpenRLHF 0.5; TRL 0.2); ``None`` disables it."""
    gamma: float = 1.0
    """Discount over policy tokens (verl, OpenRLHF, TRL: 1.0)."""
    lam_actor: float = 1.0
    """GAE lambda of the advantages (verl, OpenRLHF 1.0; TRL 0.95; VC-PPO suggests < 1 with a pretrained critic)."""
    lam_critic: float = 1.0
    """GAE lambda of the critic's targets (1.0: Monte-Carlo returns, VC-PPO's decoupled GAE)."""
    kl_coef: float = 0.001
    """KL-to-reference coefficient (verl 0.001, OpenRLHF 0.01, TRL 0.05); 0 skips the reference forward."""
    kl_mode: Literal["reward", "loss"] = "reward"
    """``reward``: ``-kl_coef * k1`` added to each policy token's reward (OpenRLHF, TRL);
    ``loss``: ``kl_coef * k3`` added to the policy loss (verl ``use_kl_loss``, ``low_var_kl``)."""
    entropy_coef: float = 0.0
    """Entropy bonus (verl, OpenRLHF: 0); entropy is logged either way."""
    whiten_advantages: bool = True
    """Whiten advantages over the batch's policy tokens (mean 0, std 1)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip of both models (verl, OpenRLHF: 1.0)."""

    # -- rejection fine-tuning --------------------------------------------------------------------
    rft_episodes: int = 32
    """Episodes the policy plays per ``rft`` round (0: use only ``rft_trajectories``)."""
    rft_threshold: float = 1.0
    """Keep trajectories whose return is at least this (1: correct; 2: faster than eager; 3: than compile)."""
    rft_trajectories: list[str] = field(default_factory=list)
    """``RecordTrajectories`` JSONL files whose episodes join the collected ones (same filter)."""
    rft_epochs: int = 2
    """SFT passes over the kept trajectories."""
    rft_lr: float = 1e-5
    """SFT AdamW learning rate (loss on assistant tokens only)."""

    # -- output -----------------------------------------------------------------------------------
    output_dir: Path = Path("runs/ppo_llm")
    """Run folder: ``<stage>/`` holds its checkpoints, ``final/``, TensorBoard events, metrics.jsonl
    and trajectories.jsonl (``RecordTrajectories`` of every episode played)."""
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    """The stages ``cuda-gym train pipeline`` runs in order; each starts from the previous one's ``final/``."""
    save_every: int = 10
    """Checkpoint every this many steps (and at the end of the stage)."""
    resume: bool = True
    """Continue from the stage's latest checkpoint, and skip stages that already have ``final/``."""
    tensorboard: bool = True
    """Write TensorBoard events (needs the ``tensorboard`` package; metrics.jsonl is always written)."""
    progress: bool = True
    """Show a tqdm progress bar (stderr) per stage."""

    def __post_init__(self) -> None:
        positive = ("episodes_per_step", "num_envs", "max_context_tokens", "max_prompt_tokens", "max_obs_tokens",
                    "max_new_tokens", "ppo_epochs", "minibatches", "micro_batch_size", "rft_epochs", "save_every")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.steps < 0 or self.rft_episodes < 0 or self.lora_rank < 0:
            raise ConfigError("steps, rft_episodes and lora_rank must be >= 0")
        if self.max_new_tokens >= self.max_context_tokens:
            raise ConfigError(f"max_new_tokens ({self.max_new_tokens}) must be below max_context_tokens "
                              f"({self.max_context_tokens})")
        if self.max_prompt_tokens + self.max_new_tokens > self.max_context_tokens:
            raise ConfigError(f"max_prompt_tokens ({self.max_prompt_tokens}) + max_new_tokens ({self.max_new_tokens}) "
                              f"must fit in max_context_tokens ({self.max_context_tokens}), or no reply fits after the prompt")
        if self.minibatches > self.episodes_per_step:
            raise ConfigError(f"minibatches ({self.minibatches}) must be at most episodes_per_step "
                              f"({self.episodes_per_step})")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be > 0 (the training forward divides by it), got {self.temperature}")
        if self.critic == "shared" and self.lora_rank == 0:
            raise ConfigError("critic='shared' puts a LoRA adapter on the actor's base: set lora_rank > 0 "
                              "(or use critic='separate')")
        if self.kl_mode not in ("reward", "loss"):
            raise ConfigError(f"kl_mode must be 'reward' or 'loss', got {self.kl_mode!r}")
        unknown = [s for s in self.stages if s not in STAGES]
        if unknown:
            raise ConfigError(f"unknown stage(s) {', '.join(unknown)}: use {', '.join(STAGES)}")
        if isinstance(self.rft_trajectories, str):
            self.rft_trajectories = [self.rft_trajectories]
        self.output_dir = Path(self.output_dir)
        if self.model == "random" and not self.model_config.get("model_type"):
            raise ConfigError('model = "random" needs model_config with a model_type (e.g. {"model_type": "qwen2"})')


FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))


def _check_keys(values: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise ConfigError(f"unknown setting(s) {', '.join(unknown)} in {where}; valid settings: {', '.join(FIELDS)}")


def read_config_file(path: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A TOML config file as (top-level settings, per-stage tables); unknown keys are an error."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib
        except ImportError as exc:
            raise ConfigError("reading TOML on Python 3.10 needs tomli: pip install tomli") from exc
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    stages = {name: data.pop(name) for name in STAGES if isinstance(data.get(name), dict)}
    _check_keys(data, str(path))
    for name, table in stages.items():
        _check_keys(table, f"[{name}] of {path}")
    return data, stages


def stage_config(
    stage: str,
    file: tuple[Mapping[str, Any], Mapping[str, Mapping[str, Any]]] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """The config ``stage`` runs with: defaults < ``STAGE_DEFAULTS`` < file top level < file ``[stage]`` < ``overrides``."""
    if stage not in STAGES:
        raise ConfigError(f"unknown stage {stage!r}: use one of {', '.join(STAGES)}")
    values: dict[str, Any] = dict(STAGE_DEFAULTS[stage])
    if file is not None:
        top, tables = file
        values.update(top)
        values.update(tables.get(stage, {}))
    _check_keys(overrides or {}, "the overrides")
    values.update(overrides or {})
    return TrainConfig(**values)


def stage_env_id(config: TrainConfig, stage: str) -> str:
    """The env of a stage: ``config.env_id`` or the stage's default."""
    return config.env_id or str(STAGE_DEFAULTS[stage]["env_id"])


def as_dict(config: TrainConfig) -> dict[str, Any]:
    """The config as JSON-friendly data (saved beside each checkpoint)."""
    out: dict[str, Any] = {}
    for name in FIELDS:
        value = getattr(config, name)
        out[name] = str(value) if isinstance(value, Path) else value
    return out

