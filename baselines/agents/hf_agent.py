"""HFAgent: a local ``transformers`` causal LM that writes Hermes ``<tool_call>`` blocks."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cuda_gym.baselines.agents.chat import SYSTEM_PROMPT, Conversation, Usage
from cuda_gym.errors import ConfigError
from cuda_gym.tools import parse_action
from cuda_gym.tools.protocol import ToolCall

logger = logging.getLogger(__name__)


@dataclass
class HFAgentConfig:
    """Settings of :class:`HFAgent` (also the ``cuda-gym eval --agent hf`` options)."""

    max_new_tokens: int = 1024
    """Most tokens of one reply."""
    context_tokens: int = 8192
    """The prompt is cut to ``context_tokens - max_new_tokens`` tokens (old tool output first)."""
    do_sample: bool = True
    """Sample (``True``) or decode greedily."""
    temperature: float = 0.7
    """Sampling temperature (with ``do_sample``)."""
    top_p: float = 0.95
    """Nucleus sampling (with ``do_sample``)."""
    top_k: int = 50
    """Top-k sampling (with ``do_sample``; 0 disables it)."""
    seed: int | None = None
    """Seed of ``torch``'s generator at every ``reset`` (reproducible samples); ``None`` leaves it."""
    system_prompt: str | None = SYSTEM_PROMPT
    """The system message; ``None`` sends none."""
    pass_tools: bool = True
    """Give the env's tool schemas to the chat template (``tools=``), which lists them Hermes style."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1 or self.context_tokens <= self.max_new_tokens:
            raise ConfigError(
                f"context_tokens ({self.context_tokens}) must exceed max_new_tokens ({self.max_new_tokens}) >= 1"
            )


class HFAgent:
    """A local causal LM (``transformers``) as an agent of the multi-turn envs.

    The conversation goes through the tokenizer's chat template (with the env's tool schemas as
    ``tools`` where the template takes them); the reply is the action as the model wrote it: the
    env parses a Hermes ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` block anywhere
    in it and answers anything else with an error observation, so an episode runs to its end
    whatever the model writes. The observation after a reply that held a valid call goes back as
    a ``tool`` message, else as a ``user`` message. The prompt is cut to the context budget (old
    tool output first, then the oldest tokens). ``usage`` counts prompt and generated tokens.

    Build it from a model and tokenizer, or with :meth:`from_pretrained` (a hub name or a local
    folder; ``gguf_file=`` loads a GGUF checkpoint).
    """

    def __init__(self, model: Any, tokenizer: Any, config: HFAgentConfig | None = None, **overrides: Any) -> None:
        base = config or HFAgentConfig()
        self.config = HFAgentConfig(**{**base.__dict__, **overrides}) if overrides else base
        if getattr(tokenizer, "chat_template", None) is None:
            raise ConfigError("the tokenizer has no chat template: set tokenizer.chat_template (a Jinja template)")
        self.model = model
        self.tokenizer = tokenizer
        self.conversation = Conversation()
        self.tools: list[dict[str, Any]] = []
        self.usage = Usage()
        self._last_call: ToolCall | None = None

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, *, gguf_file: str | None = None, device: str | None = None,
        config: HFAgentConfig | None = None, **overrides: Any,
    ) -> HFAgent:
        """Load a causal LM and its tokenizer with ``transformers`` (``gguf_file`` for GGUF weights)."""
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ConfigError("HFAgent needs transformers: pip install 'cuda-gym[agents]'") from exc
        extra = {"gguf_file": gguf_file} if gguf_file else {}
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, **extra)
        model: Any = AutoModelForCausalLM.from_pretrained(name_or_path, **extra)
        if device:
            model = model.to(device)
        model.eval()
        return cls(model, tokenizer, config, **overrides)

    # -- Agent interface --------------------------------------------------------------------------

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        """Start a conversation on the task prompt ``obs`` with the tools of ``info["tools"]``."""
        self.conversation.start(obs, self.config.system_prompt)
        self.tools = list(info.get("tools") or []) if self.config.pass_tools else []
        self._last_call = None
        if self.config.seed is not None:
            import torch

            torch.manual_seed(self.config.seed)

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """Generate the next reply to the conversation (with ``obs``, the last action's observation)."""
        if len(self.conversation.messages) > self.conversation.head:
            role = "tool" if self._last_call is not None else "user"
            self.conversation.add({"role": role, "content": obs})
        text = self._generate()
        self.conversation.add({"role": "assistant", "content": text})
        parsed = parse_action(text)
        self._last_call = parsed if isinstance(parsed, ToolCall) else None
        return text

    # -- generation -------------------------------------------------------------------------------

    def _prompt_ids(self) -> list[int]:
        """The templated, budgeted prompt as token ids."""
        budget = self.config.context_tokens - self.config.max_new_tokens

        def count(messages: list[dict[str, Any]]) -> int:
            return len(self._template(messages))

        ids = self._template(self.conversation.fit(budget, count))
        if len(ids) > budget:  # the head and the latest messages alone overflow: keep the newest tokens
            logger.info("prompt of %d tokens cut to its last %d", len(ids), budget)
            ids = ids[-budget:]
        return ids

    def _template(self, messages: list[dict[str, Any]]) -> list[int]:
        kwargs: dict[str, Any] = {"add_generation_prompt": True, "tokenize": False}
        if self.tools:
            kwargs["tools"] = self.tools
        text = self.tokenizer.apply_chat_template(messages, **kwargs)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _generate(self) -> str:
        import torch

        ids = self._prompt_ids()
        device = getattr(self.model, "device", None) or "cpu"
        input_ids = torch.tensor([ids], dtype=torch.long, device=device)
        kwargs: dict[str, Any] = {"max_new_tokens": self.config.max_new_tokens, "do_sample": self.config.do_sample}
        if self.config.do_sample:
            kwargs.update(temperature=self.config.temperature, top_p=self.config.top_p, top_k=self.config.top_k)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        if pad is not None:
            kwargs["pad_token_id"] = pad
        with torch.no_grad():
            out = self.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **kwargs)
        new = out[0, input_ids.shape[1]:].tolist()
        self.usage.requests += 1
        self.usage.prompt_tokens += len(ids)
        self.usage.completion_tokens += len(new)
        return str(self.tokenizer.decode(new, skip_special_tokens=True))
