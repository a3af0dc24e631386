"""The PPO arithmetic of cuda_gym.baselines.ppo_llm.losses against rl_stack.md section 4.4's invariants
(the numbers there come from a reference implementation)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from cuda_gym.baselines.ppo_llm import losses  # noqa: E402


def t(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32)


@pytest.mark.parametrize(("gamma", "lam", "advantages", "returns"), [
    (1.0, 1.0, [0.8, 0.6, 0.4], [1.0, 1.0, 1.0]),
    (0.5, 1.0, [0.05, 0.1, 0.4], [0.25, 0.5, 1.0]),
    (1.0, 0.95, [0.751, 0.58, 0.4], None),
])
def test_gae_on_a_known_sequence(gamma, lam, advantages, returns) -> None:
    adv, ret = losses.gae(t([0, 0, 1]), t([0.2, 0.4, 0.6]), t([1, 1, 1]), gamma, lam)
    assert adv[0].tolist() == pytest.approx(advantages, abs=1e-3)
    if returns is not None:
        assert ret[0].tolist() == pytest.approx(returns, abs=1e-6)


def test_lambda_one_gives_the_monte_carlo_return_for_any_values() -> None:
    g = torch.Generator().manual_seed(0)
    rewards, values = torch.randn(3, 7, generator=g), torch.randn(3, 7, generator=g)
    _, ret = losses.gae(rewards, values, torch.ones(3, 7), gamma=0.9, lam=1.0)
    expected = torch.zeros(3, 7)
    running = torch.zeros(3)
    for i in reversed(range(7)):
        running = rewards[:, i] + 0.9 * running
        expected[:, i] = running
    assert torch.allclose(ret, expected, atol=1e-5)


def test_masked_tokens_equal_the_compressed_sequence() -> None:
    mask = t([1, 0, 0, 1])
    adv, _ = losses.gae(t([0, 9, 9, 1]), t([0.2, 7, 7, 0.6]), mask, gamma=0.9, lam=0.8)
    assert [adv[0, 0].item(), adv[0, 3].item()] == pytest.approx([0.628, 0.4], abs=1e-6)
    compressed, _ = losses.gae(t([0, 1]), t([0.2, 0.6]), t([1, 1]), gamma=0.9, lam=0.8)
    assert torch.allclose(adv[0, [0, 3]], compressed[0])
    other, _ = losses.gae(t([0, -5, 3, 1]), t([0.2, -1, 100, 0.6]), mask, gamma=0.9, lam=0.8)
    assert torch.equal(other, adv)  # what sits on masked positions changes nothing
    assert adv[0, 1] == 0 and adv[0, 2] == 0


def test_reward_lands_on_the_last_policy_token_never_on_observations_or_padding() -> None:
    mask = t([0, 1, 1, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1])
    rewards = losses.place_rewards(torch.tensor([3.0, 2.0, -1.0]), mask)
    assert rewards[0].tolist() == [0, 0, 0, 0, 3, 0, 0]
    assert rewards[1].tolist() == [0] * 7  # no policy token: no write (verl PR #6310)
    assert rewards[2].tolist() == [0] * 6 + [-1]
    # Regression (invariant 5): a reward on a trailing observation token is lost by GAE over policy tokens.
    lost = torch.zeros(1, 7)
    lost[0, 6] = 3.0
    adv, _ = losses.gae(lost, torch.zeros(1, 7), mask[:1])
    assert torch.count_nonzero(adv) == 0
    adv, _ = losses.gae(rewards[:1], torch.zeros(1, 7), mask[:1])
    assert adv[0, [1, 2, 4]].tolist() == [3, 3, 3]


def test_kl_estimators_are_exactly_zero_when_policy_equals_reference() -> None:
    logp = torch.log_softmax(torch.randn(2, 5, generator=torch.Generator().manual_seed(1)), -1)
    for estimator in ("k1", "k2", "k3"):
        assert torch.count_nonzero(losses.kl_estimate(logp, logp.clone(), estimator)) == 0
    assert (losses.kl_estimate(logp, logp - 0.5, "k3") >= 0).all()


def test_policy_loss_at_ratio_one_and_its_bound_under_positive_advantages() -> None:
    logp = torch.zeros(1, 4)
    mask = t([1, 1, 0, 1])
    adv = torch.ones(1, 4)
    loss, stats = losses.policy_loss(logp, logp, adv, mask)
    assert loss.item() == pytest.approx(-1.0) and stats["clipfrac"] == 0 and stats["approx_kl"] == 0
    loss, stats = losses.policy_loss(logp + 2.0, logp, adv, mask, clip_high=0.2)
    assert loss.item() == pytest.approx(-1.2) and stats["clipfrac"] == 1


def test_dual_clip_bounds_negative_advantages() -> None:
    old = torch.zeros(1, 2)
    new = torch.tensor([[5.0, 5.0]])  # ratio e^5 >> 3
    adv = torch.tensor([[-2.0, -2.0]])
    per_token, stats = losses.policy_loss(new, old, adv, torch.ones(1, 2), dual_clip=3.0)
    assert per_token.item() == pytest.approx(6.0)  # -c * A
    assert stats["clipfrac_lower"] == 1
    unbounded, _ = losses.policy_loss(new, old, adv, torch.ones(1, 2), dual_clip=None)
    assert unbounded.item() > 6.0


def test_observation_tokens_carry_no_gradient() -> None:
    logits = torch.randn(1, 6, 11, generator=torch.Generator().manual_seed(2), requires_grad=True)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    mask = t([0, 1, 1, 0, 0, 1])
    logp = losses.token_logprobs(logits, ids)
    loss, _ = losses.policy_loss(logp, logp.detach(), torch.randn(1, 6), mask)
    loss.backward()
    # The logits at t predict token t+1: positions whose next token is an observation get no gradient.
    assert logits.grad is not None
    for predicted in (0, 3, 4):  # ids at 0, 3, 4 are masked; their predictors are positions -1, 2, 3
        if predicted > 0:
            assert torch.count_nonzero(logits.grad[0, predicted - 1]) == 0
    assert torch.count_nonzero(logits.grad[0, 5]) == 0  # the last position predicts nothing
    assert torch.count_nonzero(logits.grad[0, 0]) > 0


def test_token_mean_is_invariant_to_micro_batches() -> None:
    g = torch.Generator().manual_seed(3)
    logp, old, adv = torch.randn(4, 9, generator=g), torch.randn(4, 9, generator=g), torch.randn(4, 9, generator=g)
    mask = (torch.rand(4, 9, generator=g) > 0.4).float()
    whole, _ = losses.policy_loss(logp, old, adv, mask)
    count = mask.sum()
    parts = sum(losses.policy_loss(logp[i:i + 1], old[i:i + 1], adv[i:i + 1], mask[i:i + 1], count=count)[0]
                for i in range(4))
    assert torch.allclose(whole, parts, atol=1e-6)
    values, returns = torch.randn(4, 9, generator=g), torch.randn(4, 9, generator=g)
    whole_v, _ = losses.value_loss(values, values.detach() * 0.5, returns, mask)
    parts_v = sum(losses.value_loss(values[i:i + 1], values[i:i + 1] * 0.5, returns[i:i + 1], mask[i:i + 1],
                                    count=count)[0] for i in range(4))
    assert torch.allclose(whole_v, parts_v, atol=1e-6)


def test_whitening_over_masked_entries_only() -> None:
    x = torch.tensor([[1.0, 100.0, 3.0, 5.0]])
    mask = t([1, 0, 1, 1])
    out = losses.masked_whiten(x, mask)
    kept = out[0, [0, 2, 3]]
    assert kept.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert (kept**2).mean().item() == pytest.approx(1.0, abs=1e-4)
    assert out[0, 1] == 0


def test_value_loss_clips_around_the_old_values() -> None:
    old = torch.zeros(1, 2)
    returns = torch.tensor([[2.0, 2.0]])
    values = torch.tensor([[1.0, 1.0]])
    loss, stats = losses.value_loss(values, old, returns, torch.ones(1, 2), clip=0.5)
    assert loss.item() == pytest.approx(0.5 * (2.0 - 0.5) ** 2) and stats["vf_clipfrac"] == 1
    loss, _ = losses.value_loss(values, old, returns, torch.ones(1, 2), clip=None)
    assert loss.item() == pytest.approx(0.5)
