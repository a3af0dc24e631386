"""PPOTrainer: a rollout batch -> old log-probs, reference log-probs, values -> rewards and GAE -> updates.

Read top to bottom, one PPO step is:

1. ``make_batch(trajectories)``: right-pad the token sequences to ``(episodes, time)``; forward
   the actor (log-probs at the sampling temperature), the reference and the critic without
   gradients; put each episode's return on its last policy token, subtract ``kl_coef * k1`` per
   policy token (``kl_mode = "reward"``); GAE over the policy tokens only (``lam_actor`` for the
   advantages, ``lam_critic`` for the critic's targets); whiten the advantages.
2. ``update(batch)``: ``ppo_epochs`` passes over ``minibatches`` shuffled minibatches; each
   minibatch accumulates gradients over micro-batches of ``micro_batch_size`` episodes, every loss
   normalised by the minibatch's policy-token count (token-mean), then clips the gradient norms
   and steps the actor's and the critic's AdamW.

``sft(trajectories)`` is rejection fine-tuning's update: cross-entropy on the policy tokens.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cuda_gym.baselines.ppo_llm import losses
from cuda_gym.baselines.ppo_llm.config import TrainConfig
from cuda_gym.baselines.ppo_llm.models import Models
from cuda_gym.baselines.ppo_llm.rollout import RolloutStats, Trajectory, autocast


@dataclass
class Batch:
    """A rollout batch, every tensor ``(episodes, time)`` on the CPU except ``scores`` ``(episodes,)``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor
    """1 on policy tokens."""
    scores: torch.Tensor
    old_logp: torch.Tensor
    ref_logp: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    def rows(self, index: Sequence[int]) -> dict[str, torch.Tensor]:
        """The given episodes, cut to their longest sequence."""
        idx = torch.as_tensor(list(index), dtype=torch.long)
        width = int(self.attention_mask[idx].sum(1).max())
        names = ("input_ids", "attention_mask", "mask", "old_logp", "ref_logp", "values", "advantages", "returns")
        return {name: getattr(self, name)[idx, :width] for name in names}


def pad_trajectories(trajs: Sequence[Trajectory], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(input_ids, attention_mask, mask)`` of the trajectories, right-padded to the longest."""
    width = max(len(t.ids) for t in trajs)
    input_ids = torch.full((len(trajs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(trajs), width), dtype=torch.long)
    mask = torch.zeros((len(trajs), width), dtype=torch.float32)
    for row, traj in enumerate(trajs):
        n = len(traj.ids)
        input_ids[row, :n] = torch.tensor(traj.ids)
        attention[row, :n] = 1
        mask[row, :n] = torch.tensor(traj.mask, dtype=torch.float32)
    return input_ids, attention, mask


def _chunks(items: Sequence[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield list(items[start:start + size])


def _split(items: list[int], parts: int) -> list[list[int]]:
    return [items[i::parts] for i in range(parts) if items[i::parts]]


class PPOTrainer:
    """The PPO updates of one stage: ``models`` plus their two AdamW optimizers and a step counter."""

    def __init__(self, config: TrainConfig, models: Models, critic_fresh: bool = True) -> None:
        self.config = config
        self.models = models
        self.step = 0
        self.critic_fresh = critic_fresh
        """A fresh critic's head bias is set to the first batch's mean return (its weights are zero)."""
        actor_params = models.actor_parameters()
        critic_params = models.critic_parameters()
        self.actor_opt = torch.optim.AdamW(actor_params, lr=config.actor_lr, weight_decay=config.weight_decay)
        self.critic_opt = torch.optim.AdamW(critic_params, lr=config.critic_lr, weight_decay=config.weight_decay)
        self.sft_opt: torch.optim.Optimizer | None = None
        self.pad_id = int(models.tokenizer.pad_token_id)

    # -- 1. the batch -------------------------------------------------------------------------------

    def _forward(self, rows: dict[str, torch.Tensor], what: str) -> torch.Tensor:
        device = self.models.device
        ids, attn = rows["input_ids"].to(device), rows["attention_mask"].to(device)
        with autocast(self.config, device):
            if what == "actor":
                return losses.token_logprobs(self.models.actor_logits(ids, attn), ids, self.config.temperature)
            if what == "reference":
                return losses.token_logprobs(self.models.reference_logits(ids, attn), ids, self.config.temperature)
            return self.models.critic(ids, attn)

    @torch.no_grad()
    def make_batch(self, trajs: Sequence[Trajectory]) -> Batch:
        """Step 1 of the module docstring."""
        cfg = self.config
        input_ids, attention, mask = pad_trajectories(trajs, self.pad_id)
        scores = torch.tensor([t.reward for t in trajs], dtype=torch.float32)
        n, width = input_ids.shape
        old_logp = torch.zeros(n, width)
        ref_logp = torch.zeros(n, width)
        values = torch.zeros(n, width)
        empty = Batch(input_ids, attention, mask, scores, old_logp, ref_logp, values, old_logp, old_logp, old_logp)
        use_ref = cfg.kl_coef > 0
        for index in _chunks(range(n), cfg.micro_batch_size):
            rows = empty.rows(index)
            w = rows["input_ids"].shape[1]
            old_logp[index, :w] = self._forward(rows, "actor").float().cpu()
            if use_ref:
                ref_logp[index, :w] = self._forward(rows, "reference").float().cpu()
            values[index, :w] = self._forward(rows, "critic").float().cpu()
        old_logp, ref_logp = old_logp * mask, ref_logp * mask
        if self.critic_fresh:  # start the critic at the mean return (VAPO: no initial bias)
            self.models.critic.head.bias.data.fill_(float(scores.mean()))
            values = (values + float(scores.mean())) * mask
            self.critic_fresh = False
        values = values * mask
        rewards = losses.place_rewards(scores, mask)
        if use_ref and cfg.kl_mode == "reward":
            rewards = rewards - cfg.kl_coef * losses.kl_estimate(old_logp, ref_logp, "k1") * mask
        advantages, _ = losses.gae(rewards, values, mask, cfg.gamma, cfg.lam_actor)
        _, returns = losses.gae(rewards, values, mask, cfg.gamma, cfg.lam_critic)
        if cfg.whiten_advantages and mask.sum() > 1:
            advantages = losses.masked_whiten(advantages, mask)
        return Batch(input_ids, attention, mask, scores, old_logp, ref_logp, values, rewards, advantages, returns)

    # -- 2. the updates -----------------------------------------------------------------------------

    def update(self, batch: Batch, train_actor: bool = True, train_critic: bool = True) -> dict[str, float]:
        """Step 2 of the module docstring; returns the update's metrics (token-weighted means)."""
        cfg = self.config
        device = self.models.device
        sums: defaultdict[str, float] = defaultdict(float)
        tokens_seen = 0.0
        first_minibatch_ratio = float("nan")
        n = batch.input_ids.shape[0]
        for epoch in range(cfg.ppo_epochs):
            order = list(range(n))
            random.Random(cfg.seed * 7919 + self.step * 31 + epoch).shuffle(order)
            for mb_index, minibatch in enumerate(_split(order, cfg.minibatches)):
                count = float(batch.mask[minibatch].sum())
                if count == 0:
                    continue
                self.actor_opt.zero_grad(set_to_none=True)
                self.critic_opt.zero_grad(set_to_none=True)
                for micro in _chunks(minibatch, cfg.micro_batch_size):
                    rows = {k: v.to(device) for k, v in batch.rows(micro).items()}
                    tokens = float(rows["mask"].sum())
                    if train_actor:
                        stats = self._actor_loss(rows, count)
                        for key, value in stats.items():
                            sums[key] += value * tokens
                    if train_critic:
                        stats = self._critic_loss(rows, count)
                        for key, value in stats.items():
                            sums[key] += value * tokens
                    tokens_seen += tokens
                if epoch == 0 and mb_index == 0 and train_actor:
                    first_minibatch_ratio = sums["policy/ratio_mean"] / max(tokens_seen, 1.0)
                if train_actor:
                    norm = torch.nn.utils.clip_grad_norm_(self.models.actor_parameters(), cfg.max_grad_norm)
                    sums["policy/grad_norm"] += float(norm) * count
                    self.actor_opt.step()
                if train_critic:
                    norm = torch.nn.utils.clip_grad_norm_(self.models.critic_parameters(), cfg.max_grad_norm)
                    sums["value/grad_norm"] += float(norm) * count
                    self.critic_opt.step()
        self.step += 1
        out = {key: value / max(tokens_seen, 1.0) for key, value in sums.items()}
        out["policy/first_minibatch_ratio"] = first_minibatch_ratio
        m = batch.mask
        out["policy/kl_ref"] = float(losses.masked_mean(losses.kl_estimate(batch.old_logp, batch.ref_logp, "k1"), m))
        out["value/explained_variance"] = losses.explained_variance(batch.values, batch.returns, m)
        out["value/mean"] = float(losses.masked_mean(batch.values, m))
        out["policy/advantage_abs_mean"] = float(losses.masked_mean(batch.advantages.abs(), m))
        return out

    def _actor_loss(self, rows: dict[str, torch.Tensor], count: float) -> dict[str, float]:
        cfg = self.config
        with autocast(cfg, self.models.device):
            logits = self.models.actor_logits(rows["input_ids"], rows["attention_mask"])
        logp = losses.token_logprobs(logits, rows["input_ids"], cfg.temperature)
        mask = rows["mask"]
        loss, stats = losses.policy_loss(logp, rows["old_logp"], rows["advantages"], mask, clip_low=cfg.clip_low,
                                         clip_high=cfg.clip_high, dual_clip=cfg.dual_clip, count=count)
        out = {"policy/loss": float(loss.detach()) * count / max(float(mask.sum()), 1.0)}
        if cfg.kl_coef > 0 and cfg.kl_mode == "loss":
            kl = losses.masked_mean(losses.kl_estimate(logp, rows["ref_logp"], "k3"), mask, count)
            loss = loss + cfg.kl_coef * kl
            out["policy/kl_loss"] = float(kl.detach()) * count / max(float(mask.sum()), 1.0)
        if cfg.entropy_coef > 0:
            entropy = losses.masked_mean(losses.token_entropy(logits, cfg.temperature), mask, count)
            loss = loss - cfg.entropy_coef * entropy
            out["policy/entropy"] = float(entropy.detach()) * count / max(float(mask.sum()), 1.0)
        else:
            with torch.no_grad():
                out["policy/entropy"] = float(losses.masked_mean(losses.token_entropy(logits.detach(), cfg.temperature),
                                                                 mask))
        loss.backward()
        out.update({f"policy/{k}": float(v) for k, v in stats.items()})
        return out

    def _critic_loss(self, rows: dict[str, torch.Tensor], count: float) -> dict[str, float]:
        cfg = self.config
        with autocast(cfg, self.models.device):
            values = self.models.critic(rows["input_ids"], rows["attention_mask"])
        loss, stats = losses.value_loss(values, rows["values"], rows["returns"], rows["mask"], clip=cfg.value_clip,
                                        count=count)
        loss.backward()
        tokens = max(float(rows["mask"].sum()), 1.0)
        return {"value/loss": float(loss.detach()) * count / tokens, **{f"value/{k}": float(v) for k, v in stats.items()}}

    # -- rejection fine-tuning ----------------------------------------------------------------------

    def sft(self, trajs: Sequence[Trajectory], epochs: int) -> dict[str, float]:
        """Cross-entropy on the policy tokens of ``trajs`` (``rft_lr``, token-mean per minibatch)."""
        cfg = self.config
        if self.sft_opt is None:
            self.sft_opt = torch.optim.AdamW(self.models.actor_parameters(), lr=cfg.rft_lr,
                                             weight_decay=cfg.weight_decay)
        input_ids, attention, mask = pad_trajectories(trajs, self.pad_id)
        zeros = torch.zeros_like(mask)
        batch = Batch(input_ids, attention, mask, torch.zeros(len(trajs)), zeros, zeros, zeros, zeros, zeros, zeros)
        device = self.models.device
        total, tokens_seen, last, last_tokens = 0.0, 0.0, 0.0, 0.0
        for epoch in range(epochs):
            last, last_tokens = 0.0, 0.0
            order = list(range(len(trajs)))
            random.Random(cfg.seed + epoch).shuffle(order)
            for minibatch in _split(order, min(cfg.minibatches, len(order))):
                count = float(mask[minibatch].sum())
                if count == 0:
                    continue
                self.sft_opt.zero_grad(set_to_none=True)
                for micro in _chunks(minibatch, cfg.micro_batch_size):
                    rows = {k: v.to(device) for k, v in batch.rows(micro).items()}
                    with autocast(cfg, device):
                        logits = self.models.actor_logits(rows["input_ids"], rows["attention_mask"])
                    logp = losses.token_logprobs(logits, rows["input_ids"], 1.0)
                    loss = -losses.masked_mean(logp, rows["mask"], count)
                    loss.backward()
                    total += float(loss.detach()) * count
                    last += float(loss.detach()) * count
                    tokens_seen += float(rows["mask"].sum())
                    last_tokens += float(rows["mask"].sum())
                torch.nn.utils.clip_grad_norm_(self.models.actor_parameters(), cfg.max_grad_norm)
                self.sft_opt.step()
        return {"rft/sft_loss": total / max(tokens_seen, 1.0), "rft/sft_loss_last_epoch": last / max(last_tokens, 1.0),
                "rft/tokens": tokens_seen / max(epochs, 1)}

    # -- checkpoints ----------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = {"step": self.step, "critic_fresh": self.critic_fresh, "actor_opt": self.actor_opt.state_dict(),
                 "critic_opt": self.critic_opt.state_dict(), "torch_rng": torch.get_rng_state(),
                 "python_rng": random.getstate()}
        if self.sft_opt is not None:
            state["sft_opt"] = self.sft_opt.state_dict()
        if torch.cuda.is_available():
            state["cuda_rng"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state["step"])
        self.critic_fresh = bool(state.get("critic_fresh", False))
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        if "sft_opt" in state:
            self.sft_opt = torch.optim.AdamW(self.models.actor_parameters(), lr=self.config.rft_lr)
            self.sft_opt.load_state_dict(state["sft_opt"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        if "cuda_rng" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])


def rollout_metrics(trajs: Sequence[Trajectory], stats: RolloutStats) -> dict[str, float]:
    """What the rollout batch says: reward, milestones, pass and faster rates, lengths, throughput."""
    n = max(len(trajs), 1)
    milestones = Counter(_milestone(t) for t in trajs)
    turns = sum(t.turns for t in trajs)
    out = {
        "rollout/reward_mean": sum(t.reward for t in trajs) / n,
        "rollout/pass_rate": sum(1 for t in trajs if _milestone(t) >= 1) / n,
        "rollout/faster_than_eager_rate": sum(1 for t in trajs if _milestone(t) >= 2) / n,
        "rollout/faster_than_compile_rate": sum(1 for t in trajs if _milestone(t) >= 3) / n,
        "rollout/overflow_rate": sum(1 for t in trajs if t.overflow) / n,
        "rollout/turns_mean": turns / n,
        "rollout/parse_error_rate": sum(t.parse_errors for t in trajs) / max(turns, 1),
        "rollout/reply_tokens_mean": sum(t.generated for t in trajs) / max(turns, 1),
        "rollout/episode_tokens_mean": sum(len(t.ids) for t in trajs) / n,
        "perf/rollout_s": stats.seconds,
        "perf/generate_s": stats.generate_seconds,
        "perf/env_s": stats.env_seconds,
        "perf/tokens_per_s": stats.generated_tokens / max(stats.generate_seconds, 1e-9),
        "perf/env_steps_per_s": stats.env_steps / max(stats.seconds, 1e-9),
        "perf/judge_s": stats.judge_seconds,
        "perf/judge_queue_wait_s": stats.judge_queue_wait / max(stats.env_steps, 1),
    }
    for value in (-1, 1, 2, 3):
        out[f"milestone/{value}"] = milestones.get(value, 0) / n
    return out


def _milestone(traj: Trajectory) -> int:
    m = traj.info.get("milestone") if traj.info.get("final_eval") else -1
    return int(m) if isinstance(m, (int, float)) and not isinstance(m, bool) and math.isfinite(m) else -1
