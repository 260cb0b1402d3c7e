"""Rung 1 building blocks checked by hand: exact entropy and reward, advantages, sampling, presets, natural step."""
import math

import pytest
import torch

from toy_rl.bandit import (BanditConfig, entropy, expected_reward,
                           group_advantages, make_task, sample_tokens)
from toy_rl.bandit.rewards import RARE_PROB, draw_rewards
from toy_rl.bandit.rng import uniforms
from toy_rl.bandit.update import logit_step


def test_entropy_and_expected_reward_by_hand():
    logits = torch.log(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)) + 7.0   # π = 1/6, 2/6, 3/6
    p = [1 / 6, 2 / 6, 3 / 6]
    assert entropy(logits).item() == pytest.approx(-sum(q * math.log(q) for q in p), abs=1e-14)
    rewards = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    assert expected_reward(logits, rewards).item() == pytest.approx(1 / 6 + 0.25, abs=1e-14)
    uniform = torch.zeros(2, 3, 5, dtype=torch.float64)
    assert entropy(uniform).allclose(torch.full((2, 3), math.log(5), dtype=torch.float64))


def test_grpo_and_drgrpo_advantages_by_hand():
    r = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    # mean 0.25; unbiased std sqrt((0.75² + 3·0.25²)/3) = 0.5
    assert group_advantages(r)[0].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5], abs=1e-5)
    assert group_advantages(r)[1].tolist() == [0.0, 0.0, 0.0, 0.0]            # all equal: no signal
    assert group_advantages(r, "drgrpo")[0].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
    with pytest.raises(ValueError, match="advantage"):
        group_advantages(r, "ppo")


def test_uniforms_are_per_seed_streams():
    u = uniforms([0, 1, 2, 3], stream=0, step=5, shape=(100, 7))
    assert u.shape == (4, 100, 7) and u.dtype == torch.float64
    assert (u >= 0).all() and (u < 1).all()
    assert abs(u.mean().item() - 0.5) < 0.02
    assert torch.equal(uniforms([3], 0, 5, (100, 7))[0], u[3])             # seed 3 alone = seed 3 among others
    assert not torch.equal(uniforms([3], 1, 5, (100, 7)), uniforms([3], 0, 5, (100, 7)))   # streams differ
    assert not torch.equal(uniforms([3], 0, 6, (100, 7)), uniforms([3], 0, 5, (100, 7)))   # steps differ


def test_sampling_follows_the_policy():
    logits = torch.log(torch.tensor([[0.1, 0.6, 0.3]], dtype=torch.float64))
    u = uniforms([0], 0, 0, (1, 200_000))[0]
    tokens = sample_tokens(logits, u)
    freq = torch.bincount(tokens[0], minlength=3).double() / tokens.numel()
    assert freq.tolist() == pytest.approx([0.1, 0.6, 0.3], abs=0.005)


def test_presets():
    task = make_task("rare-correct", n_tokens=32, n_contexts=3)
    pi = torch.softmax(task.init_logits, -1)
    assert task.correct.sum(1).tolist() == [2, 2, 2]
    assert pi[task.correct].tolist() == pytest.approx([RARE_PROB] * 6)
    assert torch.equal(task.reward_mean, task.correct.double())
    noisy = make_task("bernoulli", n_tokens=8, n_contexts=2)
    assert noisy.bernoulli and (noisy.reward_mean[noisy.correct] == 0.8).all()
    tokens = torch.zeros(1, 2, 4, dtype=torch.long)
    with pytest.raises(ValueError):
        draw_rewards(noisy, tokens)
    assert make_task("one-correct", 5, 2).correct.sum().item() == 2
    assert sorted(make_task("graded", 5, 1).reward_mean[0].tolist()) == [0, 0.25, 0.5, 0.75, 1]


def test_natural_step_solves_the_fisher_system():
    """F·Δz = η·g with F = diag(π) − ππᵀ: the natural step is the Fisher pseudo-inverse applied to g."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5, 7, generator=g, dtype=torch.float64)
    pi = torch.softmax(z, -1)
    grad = pi * torch.randn(5, 7, generator=g, dtype=torch.float64)
    grad = grad - pi * grad.sum(-1, keepdim=True)                           # a softmax gradient sums to 0
    step = logit_step(grad, pi, lr=0.1, pg="natural")
    fisher = torch.diag_embed(pi) - pi[:, :, None] * pi[:, None, :]
    assert torch.allclose((fisher @ step[:, :, None])[:, :, 0], 0.1 * grad, atol=1e-14)
    assert torch.allclose((pi * step).sum(-1), torch.zeros(5, dtype=torch.float64), atol=1e-14)
    assert torch.equal(logit_step(grad, pi, 0.1, "vanilla"), 0.1 * grad)


@pytest.mark.parametrize("kwargs, name", [
    (dict(n_tokens=1), "n_tokens"), (dict(group_size=1), "group_size"), (dict(staleness=-1), "staleness"),
    (dict(lr=0.0), "lr"), (dict(lr=-1.0), "lr"), (dict(lr=float("nan")), "lr"), (dict(preset="easy"), "preset"),
    (dict(mode="async"), "mode"), (dict(pg="adam"), "pg"), (dict(advantage="ppo"), "advantage"),
    (dict(steps=0), "steps"), (dict(n_contexts=0), "n_contexts"),
])
def test_bad_config_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BanditConfig(**kwargs)
