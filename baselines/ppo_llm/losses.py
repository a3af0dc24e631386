"""The PPO arithmetic on token tensors: log-probs, reward placement, KL, GAE, policy and value losses.

Every function takes ``(batch, time)`` tensors and a ``mask`` of the same shape that is 1 on
policy tokens (what the model generated) and 0 on the prompt, the observations and padding.
Nothing here knows about models or envs, so each invariant of rl_stack.md section 4.4 is a unit
test of one function. Conventions follow verl's ``trainer/ppo/core_algos.py`` (GAE that skips
masked tokens, dual clip, token-mean aggregation); where OpenRLHF or TRL differ the docstring says so.
"""

from __future__ import annotations

from typing import Literal

import torch

KLEstimator = Literal["k1", "k2", "k3"]


def masked_sum(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Sum of ``x`` over the positions where ``mask`` is 1."""
    return (x * mask).sum()


def masked_mean(x: torch.Tensor, mask: torch.Tensor, count: float | torch.Tensor | None = None) -> torch.Tensor:
    """Token mean of ``x`` over ``mask``; ``count`` replaces the mask's own token count.

    Passing the token count of the whole minibatch as ``count`` makes a loss computed on
    micro-batches and summed equal the loss of the minibatch at once (token-mean aggregation,
    verl's ``loss_agg_mode: token-mean``).
    """
    denominator = mask.sum() if count is None else count
    return masked_sum(x, mask) / torch.clamp(torch.as_tensor(denominator, dtype=x.dtype, device=x.device), min=1.0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True, eps: float = 1e-8) -> torch.Tensor:
    """``x`` scaled to unit variance (and zero mean) over the masked entries; other entries become 0."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    out = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * mask


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each token given the ones before it, shape ``(batch, time)``.

    ``logits`` are the model's outputs for ``input_ids`` (``(batch, time, vocab)``); position
    ``t`` gets ``log p(input_ids[t] | input_ids[:t])`` from the logits at ``t - 1``, position 0
    gets 0 (nothing predicts the first token; it is never a policy token). ``temperature``
    divides the logits as sampling did, so the log-probs are those of the sampling policy.
    """
    logits = logits[:, :-1].float() / temperature
    targets = input_ids[:, 1:]
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    out = picked - torch.logsumexp(logits, dim=-1)
    return torch.nn.functional.pad(out, (1, 0), value=0.0)


def token_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of the next-token distribution that predicts each position (aligned like ``token_logprobs``)."""
    logits = logits[:, :-1].float() / temperature
    logp = torch.log_softmax(logits, dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return torch.nn.functional.pad(entropy, (1, 0), value=0.0)


def last_policy_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of the last 1 in each row of ``mask``; -1 for a row without any."""
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values


def place_rewards(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token rewards: each episode's scalar score on its last policy token, 0 elsewhere.

    The reward must sit on a token the model produced: on a trailing observation or padding
    token, GAE over policy tokens never sees it (rl_stack.md 4.4, invariants 4 and 5). A row
    without policy tokens gets no reward at all (verl PR #6310: index -1 would land on padding).
    """
    rewards = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    last = last_policy_index(mask)
    rows = torch.nonzero(last >= 0).squeeze(-1)
    rewards[rows, last[rows]] = scores[rows].to(rewards.dtype)
    return rewards


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: KLEstimator = "k1") -> torch.Tensor:
    """Per-token estimate of KL(policy || reference) from the sampled tokens' log-probs.

    ``k1 = logp - ref`` (unbiased, can be negative: the reward penalty of OpenRLHF and TRL);
    ``k2 = (logp - ref)^2 / 2``; ``k3 = exp(ref - logp) - (ref - logp) - 1`` (non-negative, low
    variance: verl's ``low_var_kl``, clamped to [-10, 10] as verl does). All are exactly 0 when
    the policy equals the reference.
    """
    diff = logp - ref_logp
    if estimator == "k1":
        return diff
    if estimator == "k2":
        return 0.5 * diff**2
    if estimator == "k3":
        log_ratio = torch.clamp(-diff, -20.0, 20.0)
        return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown KL estimator {estimator!r}: use k1, k2 or k3")


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the policy tokens only; returns (advantages, returns).

    Observation and padding tokens (``mask == 0``) are skipped: they add no reward and no value
    delta, and the carry (the next policy token's value and advantage) crosses them without
    decay, so the result equals GAE on the sequence compressed to its policy tokens (verl PR #2337;
    OpenRLHF instead lets the ``(gamma*lam)^gap`` decay cross observation spans). After the last
    policy token the next value is 0: episodes end there (a context overflow too: no bootstrap).
    ``returns = advantages + values`` are the critic's targets; with ``lam = 1`` and ``gamma = 1``
    they are the Monte-Carlo return. Masked positions get 0 in both.
    """
    batch, length = rewards.shape
    next_value = torch.zeros(batch, dtype=torch.float32, device=rewards.device)
    carry = torch.zeros(batch, dtype=torch.float32, device=rewards.device)
    advantages = torch.zeros(batch, length, dtype=torch.float32, device=rewards.device)
    m = mask.float()
    for t in reversed(range(length)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        step = delta + gamma * lam * carry
        on = m[:, t]
        carry = on * step + (1.0 - on) * carry
        next_value = on * values[:, t] + (1.0 - on) * next_value
        advantages[:, t] = on * step
    returns = (advantages + values) * m
    return advantages, returns


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
    count: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped (and dual-clipped) PPO surrogate, token-mean over ``mask``; returns (loss, stats).

    ``ratio = exp(logp - old_logp)`` (log-ratio clamped to +-20); per token
    ``L = max(-A*ratio, -A*clip(ratio, 1-clip_low, 1+clip_high))``, and for ``A < 0`` the dual
    clip bounds it by ``-dual_clip*A`` (Ye et al. 2020; verl ``clip_ratio_c = 3``). Separate
    ``clip_low``/``clip_high`` give DAPO's clip-higher. ``stats``: ``clipfrac`` (tokens whose
    clipped branch was taken), ``clipfrac_lower`` (dual clip active), ``approx_kl`` (mean of
    ``-log ratio``), ``ratio_mean`` and ``ratio_max``, all detached.
    """
    log_ratio = torch.clamp(logp - old_logp, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    lower = torch.zeros_like(loss, dtype=torch.bool)
    if dual_clip is not None:
        bound = -advantages * dual_clip
        lower = (advantages < 0) & (loss > bound)
        loss = torch.where(advantages < 0, torch.minimum(loss, bound), loss)
    m = mask.float()
    with torch.no_grad():
        stats = {
            "clipfrac": masked_mean((clipped > unclipped).float(), m),
            "clipfrac_lower": masked_mean(lower.float(), m),
            "approx_kl": masked_mean(-log_ratio, m),
            "ratio_mean": masked_mean(ratio, m),
            "ratio_max": (ratio * m).max() if m.any() else torch.zeros((), device=ratio.device),
        }
    return masked_mean(loss, m, count), stats


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip: float | None = 0.5,
    count: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped value loss ``0.5 * max((V - G)^2, (clip(V, V_old +- clip) - G)^2)``, token-mean.

    ``clip=None`` drops the clipped branch. ``stats``: ``vf_clipfrac`` (tokens where the clipped
    branch was larger), detached. verl and OpenRLHF clip at 0.5, TRL at 0.2.
    """
    err = (values - returns) ** 2
    m = mask.float()
    if clip is None:
        return 0.5 * masked_mean(err, m, count), {"vf_clipfrac": torch.zeros((), device=values.device)}
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    err_clipped = (clipped - returns) ** 2
    with torch.no_grad():
        stats = {"vf_clipfrac": masked_mean((err_clipped > err).float(), m)}
    return 0.5 * masked_mean(torch.maximum(err, err_clipped), m, count), stats


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """``1 - Var(G - V) / Var(G)`` over the masked tokens.

    1: the critic predicts the returns; 0 or less: no better than a constant.
    """
    m = mask.float()
    var_g = masked_mean((returns - masked_mean(returns, m)) ** 2, m)
    diff = returns - values
    var_d = masked_mean((diff - masked_mean(diff, m)) ** 2, m)
    if float(var_g) == 0.0:
        return float("nan")
    return float(1.0 - var_d / var_g)
