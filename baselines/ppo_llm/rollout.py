"""Rollouts: many episodes at once against any of the envs, token in, token out.

One episode is one token sequence ``prompt + reply1 + obs1 + reply2 + ... + replyK`` and a mask
that is 1 exactly on the reply tokens (what the model sampled; never decoded and re-encoded).
The prompt and each observation go through the tokenizer's chat template: an observation's
tokens are the template's rendering of ``base + [observation]`` minus that of ``base`` (SkyRL's
method), so the sequence is what the template would render for the whole conversation; a
template that is not prefix-preserving is refused. The reply text the env sees is the decoded
reply (special tokens skipped), exactly as ``HFAgent`` sends it; whether the observation goes
back as a ``tool`` or a ``user`` message follows the env's own parser, as in ``HFAgent``.

Envs are played ``num_envs`` at a time: every turn the replies of all live episodes are
generated in one batch, then the envs step in a thread pool (their judge calls overlap). An
episode whose context would pass ``max_context_tokens`` ends there as a failure
(``overflow_reward`` on its last reply token, no bootstrap).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

from cuda_gym.baselines.ppo_llm.config import TrainConfig
from cuda_gym.errors import ConfigError
from cuda_gym.text import truncate_middle
from cuda_gym.tools import parse_action, tool_schemas
from cuda_gym.tools.protocol import ToolCall

logger = logging.getLogger(__name__)

MARK = "ASSISTANT-REPLY-MARK-7f3a"
"""Stands in for a reply in the base conversation whose rendering is subtracted from an observation's."""


@dataclass
class Trajectory:
    """One episode as tokens: ``ids``, ``mask`` (1 on the model's own tokens), and its outcome."""

    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    reward: float = 0.0
    """The episode's return, placed on the last policy token."""
    info: dict[str, Any] = field(default_factory=dict)
    """``info`` of the last step (the judge's facts on a judged step)."""
    task_id: str = ""
    turns: int = 0
    done: bool = False
    overflow: bool = False
    """Ended because the context was full (scored ``overflow_reward``)."""
    parse_errors: int = 0
    generated: int = 0
    """Tokens the model generated (sum of the reply lengths)."""

    def add(self, ids: Sequence[int], policy: bool) -> None:
        self.ids.extend(int(i) for i in ids)
        self.mask.extend([1 if policy else 0] * len(ids))


class ChatFormat:
    """Token ids of a prompt and of observations through a tokenizer's chat template (``tools=`` too)."""

    def __init__(self, tokenizer: Any, system_prompt: str | None, tools: Sequence[dict[str, Any]] | None) -> None:
        self.tokenizer = tokenizer
        self.head = [{"role": "system", "content": system_prompt}] if system_prompt else []
        self.tools = list(tools or [])
        self._base = self.head + [{"role": "user", "content": "x"}, {"role": "assistant", "content": MARK}]
        self._base_text = self.render(self._base, generation_prompt=False)
        self._turn_end = self._base_text[self._base_text.rindex(MARK) + len(MARK):]

    def render(self, messages: list[dict[str, Any]], generation_prompt: bool) -> str:
        """The template's text of ``messages`` (with the tools, as ``HFAgent`` renders them)."""
        kwargs: dict[str, Any] = {"add_generation_prompt": generation_prompt, "tokenize": False}
        if self.tools:
            kwargs["tools"] = self.tools
        return str(self.tokenizer.apply_chat_template(messages, **kwargs))

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, prompt: str, limit: int) -> list[int]:
        """The system message, the task prompt (cut in the middle to fit ``limit`` tokens) and the generation prompt."""
        return self._fit(lambda text: self.encode(self.render(self.head + [{"role": "user", "content": text}], True)),
                         prompt, limit)

    def observation_ids(self, observation: str, role: str, end_text: str, limit: int) -> list[int]:
        """Tokens that follow a reply: the rest of the reply's turn end, the observation message, the
        next generation prompt. ``end_text`` is the text of the reply's last token when it was an end
        of turn (``""`` when the reply was cut at ``max_new_tokens``)."""
        rest = self._turn_end[len(end_text):] if end_text and self._turn_end.startswith(end_text) else self._turn_end

        def ids(text: str) -> list[int]:
            full = self.render(self._base + [{"role": role, "content": text}], True)
            if not full.startswith(self._base_text):
                raise ConfigError("the chat template is not prefix-preserving (it rewrites earlier turns, as Qwen3's "
                                  "does with <think> blocks): token-in-token-out training needs one that is")
            return self.encode(rest + full[len(self._base_text):])

        return self._fit(ids, observation, limit)

    @staticmethod
    def _fit(make: Callable[[str], list[int]], text: str, limit: int) -> list[int]:
        ids = make(text)
        for _ in range(6):  # cut the text in the middle until its tokens fit
            if len(ids) <= limit:
                break
            chars = max(64, int(len(text) * limit / len(ids) * 0.9))
            text = truncate_middle(text, chars) if chars < len(text) else text[: len(text) // 2]
            ids = make(text)
        return ids[-limit:] if len(ids) > limit else ids


def trajectory_from_record(record: dict[str, Any], chat: ChatFormat, eos_id: int, config: TrainConfig) -> Trajectory:
    """A ``RecordTrajectories`` JSONL episode as a trajectory (its actions re-encoded: SFT data, not a rollout).

    Each action becomes its tokens plus an end of turn (policy tokens); each observation but the
    last goes through the template like a rollout's. The return is the record's ``return``.
    """
    eos_text = chat.tokenizer.decode([eos_id])
    traj = Trajectory(task_id=str(record.get("task_id", "")), reward=float(record.get("return") or 0.0),
                      info=dict(record.get("final") or {}), done=True)
    traj.add(chat.prompt_ids(str(record.get("prompt", "")), config.max_prompt_tokens), policy=False)
    steps = record.get("steps") or []
    for i, step in enumerate(steps):
        traj.add(chat.encode(str(step.get("action", ""))) + [eos_id], policy=True)
        traj.turns += 1
        if i + 1 < len(steps):
            role = "tool" if (step.get("info") or {}).get("parse_ok") else "user"
            traj.add(chat.observation_ids(str(step.get("observation", "")), role, eos_text, config.max_obs_tokens),
                     policy=False)
    return traj


def read_records(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Every complete episode of some ``RecordTrajectories`` JSONL files."""
    out = []
    for path in paths:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise ConfigError(f"trajectory file {path} does not exist") from None
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash mid-write
            if record.get("complete", True):
                out.append(record)
    return out


class TimedJudge:
    """Wraps an env's judge to add up the seconds its calls take (this env's share of judge time)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def _timed(self, name: str, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return getattr(self.inner, name)(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def verify(self, ws: Any) -> Any:
        return self._timed("verify", ws)

    def profile(self, ws: Any) -> Any:
        return self._timed("profile", ws)

    def submit(self, ws: Any) -> Any:
        return self._timed("submit", ws)

    def evaluate(self, task: Any, **kwargs: Any) -> Any:
        return self._timed("evaluate", task, **kwargs)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


@dataclass
class RolloutStats:
    """What a :meth:`Rollout.collect` call measured."""

    seconds: float = 0.0
    generate_seconds: float = 0.0
    env_seconds: float = 0.0
    """Wall time of the env phases (every turn waits for its slowest env)."""
    judge_seconds: float = 0.0
    """Per turn, the longest judge time of one env, summed: the judge's part of the critical path."""
    judge_queue_wait: float = 0.0
    """Seconds judge jobs waited in an executor's queue, where the env reports it (``info["judge_queue_wait_s"]``)."""
    env_steps: int = 0
    generated_tokens: int = 0


class Rollout:
    """Plays episodes of ``env_id`` with the actor of ``models``; see the module docstring.

    ``record`` names a JSONL file that every episode is appended to (``RecordTrajectories``).
    """

    def __init__(self, config: TrainConfig, env_id: str, models: Any, record: Path | None = None) -> None:
        self.config = config
        self.models = models
        self.tokenizer = models.tokenizer
        self.envs: list[gym.Env[Any, Any]] = []
        self.judges: list[TimedJudge | None] = []
        for _ in range(min(config.num_envs, config.episodes_per_step)):
            env = gym.make(env_id, **config.env_kwargs)
            judge = getattr(env.unwrapped, "judge", None)
            timed = None
            if judge is not None and hasattr(judge, "submit"):
                timed = TimedJudge(judge)
                env.unwrapped.judge = timed  # type: ignore[attr-defined]
            if record is not None:
                from cuda_gym.wrappers import RecordTrajectories

                env = RecordTrajectories(env, record)
            self.envs.append(env)
            self.judges.append(timed)
        self.pool = ThreadPoolExecutor(max_workers=len(self.envs), thread_name_prefix="env")
        self.episodes = 0
        self.eos_ids = self._eos_ids()
        self._formats: dict[str, ChatFormat] = {}

    def _eos_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        gen = getattr(self.models.actor, "generation_config", None)
        extra = getattr(gen, "eos_token_id", None) if gen is not None else None
        ids.update(extra if isinstance(extra, list) else [extra])
        return sorted(i for i in ids if i is not None)

    def chat(self, tools: Sequence[dict[str, Any]] | None) -> ChatFormat:
        """The chat format for a tool list (built once per distinct list)."""
        tools = list(tools or []) if self.config.pass_tools else []
        key = json.dumps(tools, sort_keys=True)
        if key not in self._formats:
            self._formats[key] = ChatFormat(self.tokenizer, self.config.system_prompt, tools)
        return self._formats[key]

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for env in self.envs:
            env.close()

    # -- collecting -------------------------------------------------------------------------------

    def collect(self, episodes: int) -> tuple[list[Trajectory], RolloutStats]:
        """Play ``episodes`` episodes, ``len(self.envs)`` at a time."""
        stats = RolloutStats()
        start = time.perf_counter()
        out: list[Trajectory] = []
        while len(out) < episodes:
            wave = self.envs[: min(len(self.envs), episodes - len(out))]
            out += self._play(wave, stats)
        stats.seconds = time.perf_counter() - start
        return out, stats

    def _play(self, envs: list[gym.Env[Any, Any]], stats: RolloutStats) -> list[Trajectory]:
        cfg = self.config
        seeds = [cfg.seed * 1_000_003 + self.episodes + i for i in range(len(envs))]
        self.episodes += len(envs)
        resets = list(self.pool.map(lambda pair: pair[0].reset(seed=pair[1]), zip(envs, seeds)))
        trajs, formats = [], []
        for obs, info in resets:
            chat = self.chat(info.get("tools"))
            traj = Trajectory(task_id=str(info.get("task_id", "")), info=dict(info))
            traj.add(chat.prompt_ids(obs, cfg.max_prompt_tokens), policy=False)
            trajs.append(traj)
            formats.append(chat)
        live = list(range(len(envs)))
        while live:
            budgets = [cfg.max_context_tokens - len(trajs[i].ids) for i in live]
            for i, budget in zip(list(live), budgets):
                if budget < 1:
                    self._overflow(trajs[i])
            live = [i for i in live if not trajs[i].done]
            if not live:
                break
            t0 = time.perf_counter()
            replies = self.generate([trajs[i].ids for i in live],
                                    [min(cfg.max_new_tokens, cfg.max_context_tokens - len(trajs[i].ids)) for i in live])
            stats.generate_seconds += time.perf_counter() - t0
            actions = []
            for i, reply in zip(live, replies):
                trajs[i].add(reply, policy=True)
                trajs[i].generated += len(reply)
                stats.generated_tokens += len(reply)
                actions.append(self.tokenizer.decode(reply, skip_special_tokens=True))
            before = [self._judge_seconds(i) for i in live]
            t0 = time.perf_counter()
            results = list(self.pool.map(lambda pair: envs[pair[0]].step(pair[1]), zip(live, actions)))
            stats.env_seconds += time.perf_counter() - t0
            stats.env_steps += len(live)
            judged = [self._judge_seconds(i) - b for i, b in zip(live, before)]
            stats.judge_seconds += max(judged, default=0.0)
            for i, reply, action, (obs, reward, terminated, truncated, info) in zip(live, replies, actions, results):
                traj = trajs[i]
                traj.turns += 1
                traj.reward += float(reward)
                traj.info = dict(info)
                wait = info.get("judge_queue_wait_s")
                if isinstance(wait, (int, float)) and math.isfinite(wait):
                    stats.judge_queue_wait += float(wait)
                called = isinstance(parse_action(action), ToolCall)
                traj.parse_errors += 0 if called else 1
                if terminated or truncated:
                    traj.done = True
                    continue
                end = self.tokenizer.decode(reply[-1:]) if reply and reply[-1] in self.eos_ids else ""
                obs_ids = formats[i].observation_ids(obs, "tool" if called else "user", end, cfg.max_obs_tokens)
                if len(traj.ids) + len(obs_ids) >= cfg.max_context_tokens:
                    self._overflow(traj)
                    continue
                traj.add(obs_ids, policy=False)
            live = [i for i in live if not trajs[i].done]
        return trajs

    def _judge_seconds(self, index: int) -> float:
        judge = self.judges[index]
        return judge.seconds if judge is not None else 0.0

    def _overflow(self, traj: Trajectory) -> None:
        traj.done = traj.overflow = True
        traj.reward = self.config.overflow_reward
        traj.info = dict(traj.info, overflow=True, final_eval=False)

    @torch.no_grad()
    def generate(self, contexts: list[list[int]], budgets: list[int]) -> list[list[int]]:
        """Sample one reply per context (batched, left-padded); each cut after its first end-of-turn token."""
        from transformers import GenerationConfig

        cfg = self.config
        device = self.models.device
        pad = self.tokenizer.pad_token_id
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ctx in enumerate(contexts):
            input_ids[row, width - len(ctx):] = torch.tensor(ctx)
            attention[row, width - len(ctx):] = 1
        generation = GenerationConfig(
            max_new_tokens=max(budgets), do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p,
            top_k=cfg.top_k, repetition_penalty=1.0, pad_token_id=pad, eos_token_id=self.eos_ids, use_cache=True,
        )
        actor = self.models.actor
        was_training = actor.training
        actor.eval()
        try:
            with autocast(self.config, device):
                out = actor.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                     generation_config=generation)
        finally:
            actor.train(was_training)
        replies = []
        for row, budget in enumerate(budgets):
            new = out[row, width:].tolist()[:budget]
            for j, token in enumerate(new):
                if token in self.eos_ids:
                    new = new[: j + 1]
                    break
            replies.append(new)
        return replies


def autocast(config: TrainConfig, device: torch.device) -> Any:
    """bfloat16 autocast on a GPU with ``mixed_precision``, else a no-op context."""
    import contextlib

    if device.type == "cuda" and config.mixed_precision:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def multi_turn_tools(env_id: str) -> list[dict[str, Any]]:
    """The tool schemas an env id's episodes carry (none for single-turn ids): for records without ``tools``."""
    return [] if "SingleTurn" in env_id else tool_schemas()
