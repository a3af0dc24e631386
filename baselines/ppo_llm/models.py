"""The trainer's models: the actor (a causal LM, optionally LoRA), the critic (a value head on a
backbone), the KL reference, and their checkpoints.

Layout of a checkpoint folder (``<stage>/checkpoint-<step>/`` or ``<stage>/final/``)::

    actor/          save_pretrained of the actor (a full model, or the LoRA adapter with LoRA)
    tokenizer/      save_pretrained of the tokenizer
    critic.pt       the critic's trainable tensors (value head, and its backbone or its adapter)
    trainer.pt      optimizer states, step, RNG states (checkpoints only: ``final/`` has none)
    meta.json       stage, step, base model, LoRA settings

A ``final/actor`` of full fine-tuning is an ordinary model folder: ``cuda-gym eval --agent hf
--model runs/x/ppo/final/actor`` plays it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cuda_gym.baselines.ppo_llm.config import TrainConfig, as_dict
from cuda_gym.errors import ConfigError

logger = logging.getLogger(__name__)

ACTOR_ADAPTER = "default"
CRITIC_ADAPTER = "critic"
BASE_DIR = "base_model"
"""Where a run saves a model built from ``model_config`` (``model = "random"``) so every stage loads the same one."""


def resolve_device(name: str) -> torch.device:
    """``auto`` -> the first GPU if one is visible, else the CPU."""
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asked for but no GPU is visible: use device='cpu' or 'auto'")
    return device


def weights_dtype(config: TrainConfig, device: torch.device) -> torch.dtype:
    """The dtype the weights are loaded in (see ``TrainConfig.dtype``)."""
    if config.dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" and config.lora_rank > 0 else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[config.dtype]


def _transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:
        raise ConfigError("the trainer needs transformers: pip install 'cuda-gym[train]'") from exc
    return transformers


def _peft() -> Any:
    try:
        import peft
    except ImportError as exc:
        raise ConfigError("lora_rank > 0 needs peft: pip install 'cuda-gym[train]'") from exc
    return peft


def _dtype_kwarg(dtype: torch.dtype) -> dict[str, Any]:
    # transformers 5 renamed torch_dtype to dtype; the GPU image may have a 4.x.
    major = int(_transformers().__version__.split(".")[0])
    return {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}


def load_tokenizer(name_or_path: str, gguf_file: str | None = None) -> Any:
    """A tokenizer with a chat template (``transformers.AutoTokenizer``); pad falls back to eos."""
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = _transformers().AutoTokenizer.from_pretrained(name_or_path, **extra)
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError(f"the tokenizer of {name_or_path} has no chat template: use an instruct/chat model")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(name_or_path: str | Path, dtype: torch.dtype, gguf_file: str | None = None) -> Any:
    """``AutoModelForCausalLM.from_pretrained`` in ``dtype`` (GGUF weights with ``gguf_file``)."""
    extra: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
    return _transformers().AutoModelForCausalLM.from_pretrained(str(name_or_path), **extra, **_dtype_kwarg(dtype))


def random_causal_lm(model_config: dict[str, Any], tokenizer: Any, dtype: torch.dtype = torch.float32) -> Any:
    """A randomly initialised causal LM from ``transformers`` config fields (``model_type`` required)."""
    tf = _transformers()
    fields = dict(model_config)
    model_type = fields.pop("model_type")
    fields.setdefault("vocab_size", len(tokenizer))
    fields.setdefault("pad_token_id", tokenizer.pad_token_id)
    fields.setdefault("eos_token_id", tokenizer.eos_token_id)
    fields.setdefault("bos_token_id", tokenizer.bos_token_id)
    cfg = tf.AutoConfig.for_model(model_type, **fields)
    return tf.AutoModelForCausalLM.from_config(cfg).to(dtype)


def decoder_of(lm: Any) -> Any:
    """The transformer body of a causal LM (no LM head): what the value head reads."""
    inner = lm.get_base_model() if hasattr(lm, "get_base_model") else lm  # through a peft wrapper
    return inner.get_decoder() if hasattr(inner, "get_decoder") else getattr(inner, inner.base_model_prefix)


def hidden_size_of(lm: Any) -> int:
    cfg = lm.config
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return int(text.hidden_size)


class ValueModel(nn.Module):
    """The critic: a backbone's last hidden states through ``Linear(hidden, 1)``, one value per token.

    The head starts at zero (rl_stack.md 4.4: no positive bias from a reward model; VAPO) and has no
    dropout. ``backbone`` is its own copy of the decoder (``critic = "separate"``), or the actor's
    decoder with the ``critic`` LoRA adapter switched on around each forward (``shared``; then the
    backbone is not a registered submodule, so ``parameters()`` are the critic's own).
    """

    def __init__(self, backbone: nn.Module, hidden_size: int, shared_with: Any = None) -> None:
        super().__init__()
        self.shared_with = shared_with
        if shared_with is None:
            self.backbone = backbone
        else:
            self.__dict__["_shared_backbone"] = backbone  # not a submodule: its parameters are the actor's
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def body(self) -> Any:
        return self.backbone if self.shared_with is None else self.__dict__["_shared_backbone"]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Values, shape ``(batch, time)``, in float32."""
        with use_adapter(self.shared_with, CRITIC_ADAPTER):
            hidden = self.body()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden.to(self.head.weight.dtype)).squeeze(-1).float()


@contextlib.contextmanager
def use_adapter(peft_model: Any, name: str) -> Iterator[None]:
    """Switch a multi-adapter peft model to adapter ``name`` for the block (no-op for ``None``)."""
    if peft_model is None:
        yield
        return
    peft_model.set_adapter(name)
    try:
        yield
    finally:
        peft_model.set_adapter(ACTOR_ADAPTER)


def _lora_config(config: TrainConfig) -> Any:
    targets: Any = config.lora_target_modules
    if targets != "all-linear":
        targets = [t.strip() for t in targets.split(",") if t.strip()]
    return _peft().LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0,
                              target_modules=targets, task_type="CAUSAL_LM")


@dataclass
class Models:
    """Everything a stage trains or reads: ``actor``, ``critic``, ``tokenizer`` and the reference.

    ``reference_logits(...)`` is the KL reference's forward: the base with the adapters disabled
    under LoRA, else a frozen copy of the actor as the stage started (made only when ``kl_coef > 0``).
    """

    actor: Any
    critic: ValueModel
    tokenizer: Any
    device: torch.device
    lora: bool
    reference: Any = None
    base: str = ""
    """The base model path or name (LoRA checkpoints are adapters over it)."""
    gguf_file: str | None = None

    def actor_parameters(self) -> list[nn.Parameter]:
        """What the actor's optimizer updates (the adapter only with LoRA)."""
        if not self.lora:
            return [p for p in self.actor.parameters() if p.requires_grad]
        return [p for n, p in self.actor.named_parameters() if f".{ACTOR_ADAPTER}." in n]

    def critic_parameters(self) -> list[nn.Parameter]:
        """What the critic's optimizer updates: the head, plus the backbone (or its adapter)."""
        if self.critic.shared_with is not None:
            adapter = [p for n, p in self.actor.named_parameters() if f".{CRITIC_ADAPTER}." in n]
            return adapter + list(self.critic.head.parameters())
        return [p for p in self.critic.parameters() if p.requires_grad]

    def actor_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.actor(input_ids=input_ids, attention_mask=attention_mask).logits

    @torch.no_grad()
    def reference_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self.lora:
            with self.actor.disable_adapter():
                return self.actor(input_ids=input_ids, attention_mask=attention_mask).logits
        if self.reference is None:
            raise RuntimeError("no reference model: it is made only when kl_coef > 0")
        return self.reference(input_ids=input_ids, attention_mask=attention_mask).logits

    def critic_state(self) -> dict[str, torch.Tensor]:
        """The critic's trainable tensors by name (what ``critic.pt`` holds)."""
        if self.critic.shared_with is not None:
            state = {f"adapter.{n}": p.detach().cpu() for n, p in self.actor.named_parameters()
                     if f".{CRITIC_ADAPTER}." in n}
            state.update({f"head.{n}": t.detach().cpu() for n, t in self.critic.head.state_dict().items()})
            return state
        names = {id(p) for p in self.critic_parameters()}
        state = {n: p.detach().cpu() for n, p in self.critic.named_parameters() if id(p) in names}
        state.update({f"head.{n}": t.detach().cpu() for n, t in self.critic.head.state_dict().items()})
        return state

    def load_critic_state(self, state: dict[str, torch.Tensor]) -> None:
        if self.critic.shared_with is not None:
            params = dict(self.actor.named_parameters())
            for name, tensor in state.items():
                if name.startswith("adapter."):
                    params[name[len("adapter."):]].data.copy_(tensor)
            self.critic.head.load_state_dict({n[len("head."):]: t for n, t in state.items() if n.startswith("head.")})
            return
        missing = self.critic.load_state_dict(state, strict=False)
        unexpected = [k for k in missing.unexpected_keys if not k.startswith("head.")]
        if unexpected:
            raise ConfigError(f"critic.pt does not fit this critic (unexpected tensors {unexpected[:3]}...): "
                              "the checkpoint was made with other critic/lora settings")


def build_models(config: TrainConfig, start: Path | None, base: str, gguf_file: str | None) -> Models:
    """Load the actor and critic of a stage: from checkpoint folder ``start`` if given, else from ``base``.

    ``base`` is the run's base model (a hub name or folder). With LoRA the actor is ``base`` plus
    the adapter of ``start/actor`` (a new adapter when ``start`` is None); without, the actor is
    ``start/actor`` itself. The critic is rebuilt from the actor's starting weights and, when
    ``start/critic.pt`` exists, loaded from it; a fresh critic's head is zero.
    """
    device = resolve_device(config.device)
    dtype = weights_dtype(config, device)
    if start is not None and (start / "tokenizer").is_dir():
        tokenizer = load_tokenizer(str(start / "tokenizer"))
    elif config.tokenizer and config.model != "random":  # a random base folder holds its tokenizer
        tokenizer = load_tokenizer(config.tokenizer)
    else:
        tokenizer = load_tokenizer(base, gguf_file)
    lora = config.lora_rank > 0
    if start is not None and not lora:
        lm = load_causal_lm(start / "actor", dtype)
    else:
        lm = load_causal_lm(base, dtype, gguf_file)
    lm.config.use_cache = False
    # The critic's own backbone copies the actor's starting weights (before any adapter).
    critic_lm = copy.deepcopy(lm) if config.critic == "separate" else None
    if lora:
        peft = _peft()
        if start is not None and (start / "actor" / "adapter_config.json").is_file():
            lm = peft.PeftModel.from_pretrained(lm, str(start / "actor"), adapter_name=ACTOR_ADAPTER, is_trainable=True)
        else:
            lm = peft.get_peft_model(lm, _lora_config(config), adapter_name=ACTOR_ADAPTER)
    if config.critic == "shared":
        lm.add_adapter(CRITIC_ADAPTER, _lora_config(config))
        lm.set_adapter(ACTOR_ADAPTER)
        critic = ValueModel(decoder_of(lm), hidden_size_of(lm), shared_with=lm)
    else:
        assert critic_lm is not None
        if lora:
            critic_lm = _peft().get_peft_model(critic_lm, _lora_config(config), adapter_name=ACTOR_ADAPTER)
        critic = ValueModel(decoder_of(critic_lm), hidden_size_of(critic_lm))
        del critic_lm
    critic.head.to(torch.float32)
    if config.gradient_checkpointing:
        lm.gradient_checkpointing_enable()
        enable = getattr(critic.body(), "gradient_checkpointing_enable", None) if config.critic == "separate" else None
        if enable is not None:
            enable()
    models = Models(actor=lm.to(device), critic=critic.to(device), tokenizer=tokenizer, device=device, lora=lora,
                    base=base, gguf_file=gguf_file)
    models.actor.eval()  # no dropout anywhere: old and new log-probs must agree (ratio 1 at the first minibatch)
    models.critic.eval()
    if config.gradient_checkpointing:  # transformers checkpoints only in train mode; dropout stays at the configs' 0
        models.actor.train()
        models.critic.train()
    if start is not None and (start / "critic.pt").is_file():
        models.load_critic_state(torch.load(start / "critic.pt", map_location="cpu", weights_only=True))
    return models


def make_reference(models: Models, config: TrainConfig) -> None:
    """Freeze a copy of the actor as the KL reference (full fine-tuning with ``kl_coef > 0`` only)."""
    if models.lora or config.kl_coef == 0 or models.reference is not None:
        return
    reference = copy.deepcopy(models.actor)
    reference.requires_grad_(False)
    reference.eval()
    models.reference = reference


def save_checkpoint(models: Models, folder: Path, config: TrainConfig, stage: str, step: int,
                    trainer_state: dict[str, Any] | None) -> None:
    """Write a checkpoint folder (see the module docstring); written to ``<folder>.tmp`` then renamed."""
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    if models.lora:
        models.actor.save_pretrained(str(tmp / "actor"), selected_adapters=[ACTOR_ADAPTER])
    else:
        models.actor.save_pretrained(str(tmp / "actor"))
    models.tokenizer.save_pretrained(str(tmp / "tokenizer"))
    torch.save(models.critic_state(), tmp / "critic.pt")
    if trainer_state is not None:
        torch.save(trainer_state, tmp / "trainer.pt")
    meta = {"stage": stage, "step": step, "base": models.base, "gguf_file": models.gguf_file,
            "lora_rank": config.lora_rank, "critic": config.critic, "config": as_dict(config)}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    tmp.rename(folder)
