"""Models and tokenizers built in code (no download), and a small text env where the right tool call wins.

For tests, smoke runs and GPU machines without a model hub: :func:`bpe_tokenizer` trains a
byte-level BPE on some text (``tokenizer = "builtin"`` of the trainer), :func:`word_tokenizer`
makes a tokenizer whose vocabulary is a few whole pieces (tool calls are one token each), and
:class:`ToolChoiceEnv` is a two-turn env on which a tiny random model learns in a minute of CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym

from cuda_gym.envs.spaces import PrintableText
from cuda_gym.tools import format_tool_call, parse_action, tool_schemas
from cuda_gym.tools.protocol import ToolCall

CHATML_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\nCall one function per turn. The functions:\n<tools>"
    "{% for t in tools %}\n{{ t | tojson }}{% endfor %}\n</tools>\n"
    'Reply with <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>.<|im_end|>\n'
    "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}{% if not (loop.first and m.role == 'system') %}"
    "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A ChatML template with Hermes tool listing, as Qwen2.5's and SmolLM2's are (prefix-preserving)."""

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TOOL_TAGS = ["<tool_call>", "</tool_call>"]


def _wrap(tok: Any) -> Any:
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHATML_TEMPLATE
    return fast


def bpe_tokenizer(corpus: Iterable[str], vocab_size: int = 4096) -> Any:
    """A byte-level BPE (any text round-trips) trained on ``corpus``, with ChatML specials and template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(corpus), trainer)
    tok.add_tokens(TOOL_TAGS)
    return _wrap(tok)


PIECE = re.compile(r'<tool_call>|</tool_call>|\{"name": "[a-z_]+", "arguments": \{\}\}| ?[A-Za-z_:]+|\n|.')
"""How :func:`word_tokenizer` cuts text: tool tags, whole argument-less tool calls, words (with their space), characters."""


def word_tokenizer(texts: Iterable[str]) -> Any:
    """A tokenizer whose vocabulary is the pieces (``PIECE``) of ``texts``: a whole tool call is one token."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    pieces = sorted({p for text in texts for p in PIECE.findall(text)})
    vocab = {token: i for i, token in enumerate(SPECIAL + ["<unk>"] + pieces)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE.pattern), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL)
    return _wrap(tok)


class ToolChoiceEnv(gym.Env[str, str]):
    """A two-turn text env of our own: the prompt names a tool; calling it wins.

    ``reset`` picks a target among ``targets`` and asks ``Call the <target> tool.``; ``step``
    parses the action with the envs' own parser (``cuda_gym.tools.parse_action``). The right call
    ends the episode with reward 1 (``terminated``); anything else gets ``Wrong. Call the <target>
    tool.`` and, at the ``max_turns``-th reply, reward -1 (``truncated``). ``info`` mirrors the
    kernel envs' keys the trainer logs (``task_id``, ``tools``, ``parse_ok``, ``final_eval``,
    ``milestone``), so the trainer sees no difference.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, targets: Sequence[str] = ("compile", "submit"), tools: Sequence[str] = ("compile", "verify",
                 "profile", "submit"), max_turns: int = 2) -> None:
        self.targets = list(targets)
        self.tool_names = list(tools)
        self.max_turns = max_turns
        self.observation_space = PrintableText(1024)
        self.action_space = PrintableText(4096)
        self.target = self.targets[0]
        self.turn = 0

    def texts(self) -> list[str]:
        """Every text the env and a right answer can contain (a :func:`word_tokenizer`'s corpus)."""
        out = []
        for target in self.targets:
            out += [self._prompt(target), self._wrong(target)]
        out += [format_tool_call(name, {}) for name in self.tool_names]
        out += [call[len("<tool_call>"):-len("</tool_call>")] for call in out[-len(self.tool_names):]]
        return out + ["user assistant tool system"]

    def _prompt(self, target: str) -> str:
        return f"Call the {target} tool."

    def _wrong(self, target: str) -> str:
        return f"Wrong. Call the {target} tool."

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.target = self.targets[int(self.np_random.integers(len(self.targets)))]
        self.turn = 0
        schemas = [s for s in tool_schemas() if s["function"]["name"] in self.tool_names]
        return self._prompt(self.target), {"task_id": f"toy/{self.target}", "tools": schemas, "turn": 0}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn += 1
        call = parse_action(action)
        info: dict[str, Any] = {"task_id": f"toy/{self.target}", "turn": self.turn,
                                "parse_ok": isinstance(call, ToolCall), "final_eval": False}
        if isinstance(call, ToolCall) and call.name == self.target:
            info.update(final_eval=True, milestone=1, passed=True)
            return "Right.", 1.0, True, False, info
        if self.turn >= self.max_turns:
            info.update(final_eval=True, milestone=-1, passed=False)
            return self._wrong(self.target), -1.0, False, True, info
        return self._wrong(self.target), 0.0, False, False, info


def register_toy_env() -> str:
    """Register ``ToolChoice-v0`` (idempotent) and return the id."""
    env_id = "ToolChoice-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point="cuda_gym.baselines.ppo_llm.tiny:ToolChoiceEnv")
    return env_id
