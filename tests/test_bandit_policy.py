"""Rung 1 building blocks checked by hand: exact entropy and reward, advantages, sampling, presets, natural step."""
import math

import pytest
import torch

from toy_rl.bandit import (BanditConfig, entropy, expected_reward,
                           group_advantages, make_task, sample_tokens)
from toy_rl.bandit.answers import answer_length, answer_lengths, answer_tokens, sample_batch
from toy_rl.bandit.policy import best_found, best_prob
from toy_rl.bandit.rewards import RARE_PROB, TRAP_PROB, TRAP_REWARD, draw_rewards
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
    (dict(answer_len=0), "answer_len"), (dict(answer_len=1.5), "answer_len"), (dict(length_ratio=0.0), "length_ratio"),
    (dict(length_ratio=-2.0), "length_ratio"), (dict(length_ratio=float("inf")), "length_ratio"),
    (dict(length_ratio=True), "length_ratio"),
])
def test_bad_config_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BanditConfig(**kwargs)


def test_answer_lengths_by_hand():
    assert [answer_length(r, 4, 2.0) for r in (1.0, 0.5, 0.0)] == [4, 6, 8]
    assert [answer_length(r, 1, 1.5) for r in (1.0, 0.0)] == [1, 2]                # halves round up
    assert [answer_length(r, 2, 4.0) for r in (1.0, 0.5, 0.0)] == [2, 5, 8]
    assert answer_length(0.0, 3, 0.1) == 1                                        # never shorter than 1 token
    rewards = torch.tensor([[1.0, 0.0, 0.5, 0.25, 2.0, -1.0]], dtype=torch.float64)
    assert answer_lengths(rewards, 4, 2.0).tolist() == [[4, 8, 6, 7, 4, 8]]           # rewards clipped to [0, 1]
    assert BanditConfig(answer_len=4, length_ratio=2.0).max_len == 8
    assert BanditConfig().max_len == 1 and BanditConfig(answer_len=4, length_ratio=0.5).max_len == 4


def test_multi_token_batch_layout():
    task = make_task("rare-correct", n_tokens=8, n_contexts=2)
    z = task.init_logits.expand(3, 2, 8).clone()
    w = torch.zeros(3, 2, 8, dtype=torch.float64)                                # uniform continuation
    batch = sample_batch(task, z, [0, 1, 2], 0, 6, "grpo", w, answer_len=2, length_ratio=2.0)
    assert batch.cont_tokens.shape == (3, 2, 6, 3) and batch.lengths.tolist() == \
        torch.where(batch.rewards == 1, 2, 4).tolist()
    assert torch.allclose(batch.cont_old_logp, torch.full_like(batch.cont_old_logp, -math.log(8)))
    logp = torch.log_softmax(z, -1).gather(-1, batch.tokens)
    flat, old, adv, mask = answer_tokens(logp, w, batch)
    assert flat.shape == old.shape == mask.shape == (3, 12, 4) and adv.shape == (3, 12)
    assert mask.sum(-1).tolist() == batch.lengths.reshape(3, 12).double().tolist()
    assert torch.equal(flat[..., 0], logp.reshape(3, 12)) and torch.equal(old, torch.cat(
        [batch.old_logp[..., None], batch.cont_old_logp], -1).reshape(3, 12, 4))
    one = sample_batch(task, z, [0, 1, 2], 0, 6, "grpo")                         # one-token: no continuation
    assert one.lengths is None and torch.equal(one.tokens, batch.tokens) and torch.equal(one.rewards, batch.rewards)
    with pytest.raises(ValueError, match="continuation"):
        sample_batch(task, z, [0, 1, 2], 0, 6, "grpo", None, answer_len=2, length_ratio=2.0)


def test_trap_preset():
    task = make_task("trap", n_tokens=32, n_contexts=3)
    pi = torch.softmax(task.init_logits, -1)
    trap = task.reward_mean == TRAP_REWARD
    assert trap.sum(1).tolist() == [1, 1, 1] and task.correct.sum(1).tolist() == [2, 2, 2]
    assert pi[trap].tolist() == pytest.approx([TRAP_PROB] * 3)
    assert pi[task.correct].tolist() == pytest.approx([RARE_PROB] * 6)
    assert torch.equal(task.reward_mean[task.correct], torch.ones(6, dtype=torch.float64))
    assert (task.reward_mean[~(trap | task.correct)] == 0).all() and not task.bernoulli
    with pytest.raises(ValueError, match="n_tokens"):
        make_task("trap", n_tokens=2)


def test_best_found_by_hand():
    correct = torch.tensor([[True, True, False, False], [False, False, False, True]])
    probs_ = torch.tensor([[[0.3, 0.3, 0.4, 0.0], [0.1, 0.1, 0.1, 0.7]],        # seed 0: found in both
                           [[0.2, 0.25, 0.55, 0.0], [0.6, 0.0, 0.0, 0.4]],       # seed 1: 0.45 and 0.4, not found
                           [[0.1, 0.0, 0.9, 0.0], [0.0, 0.0, 0.0, 1.0]]], dtype=torch.float64)   # seed 2: one of two
    logits = torch.log(probs_.clamp(min=1e-300))
    assert torch.allclose(best_prob(logits, correct), torch.tensor([[0.6, 0.7], [0.45, 0.4], [0.1, 1.0]], dtype=torch.float64))
    assert best_found(logits, correct).tolist() == [1.0, 0.0, 0.5]
    assert best_found(logits, correct, threshold=0.05).tolist() == [1.0, 1.0, 1.0]
