"""The bandit's loop under a Schedule (toy_rl.bandit.schedule): where an update sits and how stale it is; a schedule
reproduces the staleness scenario it names (config.staleness in reuse or lag mode) bit for bit, also with
multi-token answers, gives r ≡ 1 exactly on fresh data, and the entropy bonus is ∂H/∂z."""
from dataclasses import replace

import numpy as np
import pytest
import torch

from toy_rl.bandit import BanditConfig, EntropyBonus, Schedule, entropy_gradient, position, simulate
from toy_rl.bandit.policy import entropy

SMALL = BanditConfig(steps=40)


def train(config, rule, seeds, schedule=Schedule(), bonus=EntropyBonus(), dual_clip=None):
    return simulate(config, rule, seeds, schedule=schedule, bonus=bonus, dual_clip=dual_clip)


@pytest.mark.parametrize("schedule, sim", [(Schedule(), {}), (Schedule(epochs=3), dict(staleness=2)),
                                           (Schedule(lag=2), dict(staleness=2, mode="lag"))])
@pytest.mark.parametrize("answers", [{}, dict(answer_len=2, length_ratio=2.0)])
@pytest.mark.parametrize("rule", ["symmetric", "clip-higher", "bapo"])
def test_a_schedule_is_the_staleness_it_names(schedule, sim, answers, rule):
    config = replace(SMALL, **answers)
    mine, theirs = train(config, rule, range(3), schedule), simulate(replace(config, **sim), rule, range(3))
    assert mine.metrics.keys() == theirs.metrics.keys()
    for key in mine.metrics:
        np.testing.assert_array_equal(mine.metrics[key], theirs.metrics[key], err_msg=key)
    assert torch.equal(mine.final_logits, theirs.final_logits)


def test_position_counts_epochs_minibatches_and_lag():
    s = Schedule(epochs=2, minibatches=3, lag=1)
    assert [position(t, s).ratio_age for t in range(12)] == list(range(12))   # the first two rollouts: initial weights
    assert position(7, s) == (1, 0, 1, 7, 7)                  # rollout 1, epoch 0, mini-batch 1, sampled at version 0
    assert position(13, s) == (2, 0, 1, 7, 7)                 # rollout 2 was sampled at version 6
    r = Schedule(epochs=2, minibatches=3, lag=1, recompute_old=True)
    assert position(13, r) == (2, 0, 1, 7, 1)
    assert Schedule().label() == "on-policy" and "π_old recomputed" in r.label()


@pytest.mark.parametrize("bad", [dict(epochs=0), dict(minibatches=1.5), dict(lag=-1), dict(recompute_old=1)])
def test_schedule_refuses_bad_values(bad):
    with pytest.raises(ValueError):
        Schedule(**bad)


def test_the_loop_refuses_what_it_cannot_train():
    with pytest.raises(ValueError, match="multiple of minibatches"):
        train(SMALL, "symmetric", [0], Schedule(minibatches=3))
    with pytest.raises(ValueError, match="Schedule"):
        train(replace(SMALL, staleness=2), "symmetric", [0])


def test_multi_token_minibatches_and_recomputed_old():
    config = replace(SMALL, answer_len=2, length_ratio=3.0)
    run = train(config, "symmetric", range(2), Schedule(minibatches=4, lag=1, recompute_old=True))
    m = run.metrics
    fresh = m["minibatch"] == 0
    assert (m["ratio_max"][fresh] == 1).all() and (m["clip_frac"][fresh] == 0).all()
    assert m["behaviour_kl"].max() > 0 and np.isfinite(m["continuation_entropy"]).all()


def test_fresh_minibatches_have_ratio_exactly_one_and_later_ones_clip():
    run = train(replace(SMALL, steps=80), "symmetric", range(4), Schedule(minibatches=4))
    m = run.metrics
    fresh = m["minibatch"] == 0
    assert (m["ratio_max"][fresh] == 1).all() and (m["ratio_min"][fresh] == 1).all()
    assert (m["clip_frac"][fresh] == 0).all() and m["clip_frac"][~fresh].max() > 0
    np.testing.assert_array_equal(m["ratio_age"], m["minibatch"])


def test_recomputed_old_hides_the_lag_from_the_clip():
    plain = train(SMALL, "symmetric", range(4), Schedule(lag=1))
    hidden = train(SMALL, "symmetric", range(4), Schedule(lag=1, recompute_old=True))
    assert (hidden.metrics["clip_frac"] == 0).all() and (hidden.metrics["approx_kl"] == 0).all()
    assert hidden.metrics["behaviour_kl"].max() > 0 and plain.metrics["approx_kl"].max() > 0
    np.testing.assert_array_equal(plain.metrics["approx_kl"], plain.metrics["behaviour_kl"])


def test_entropy_gradient_is_autograd():
    z = (2 * torch.randn(3, 4, 16, dtype=torch.float64)).requires_grad_(True)
    (g,) = torch.autograd.grad(entropy(z).sum(), (z,))
    assert torch.allclose(entropy_gradient(z.detach()), g, atol=1e-12)
    assert torch.allclose(entropy_gradient(z.detach()).sum(-1), torch.zeros(3, 4, dtype=torch.float64), atol=1e-12)


def test_a_bonus_keeps_entropy_and_a_zero_bonus_changes_nothing():
    trap = replace(SMALL, preset="trap", steps=60)
    base = train(trap, "symmetric", range(4))
    zero = train(trap, "symmetric", range(4), bonus=EntropyBonus(0.0))
    assert np.array_equal(base.metrics["entropy"], zero.metrics["entropy"])
    bonus = train(trap, "symmetric", range(4), bonus=EntropyBonus(coef=0.2))
    assert bonus.final("entropy").mean() > base.final("entropy").mean()
    assert (bonus.metrics["entropy_coef"] == 0.2).all()


def test_the_adaptive_bonus_moves_its_coefficient_towards_the_target():
    b = EntropyBonus(coef=0.1, target=1.0, delta=0.05, coef_max=0.12)
    H = torch.tensor([0.5, 1.5], dtype=torch.float64)
    coef = torch.tensor([0.1, 0.1], dtype=torch.float64)
    assert torch.equal(b.applied(coef, H), torch.tensor([0.1, 0.0], dtype=torch.float64))   # off above the target
    assert torch.allclose(b.next_coef(coef, H), torch.tensor([0.12, 0.05], dtype=torch.float64))   # clamped at coef_max
    assert "adaptive" in b.label() and "β = 0.1" in EntropyBonus(0.1).label()
    with pytest.raises(ValueError):
        EntropyBonus(coef=-1.0)
    with pytest.raises(ValueError):
        EntropyBonus(target=0.0)


def test_dual_clip_in_the_loop_only_acts_beyond_c():
    s = Schedule(minibatches=8, lag=4)
    trap = replace(SMALL, preset="trap", steps=120)
    plain, capped = (train(trap, "symmetric", range(4), s, dual_clip=dc) for dc in (None, 3.0))
    if capped.metrics["dual_clip_frac"].max() == 0:                 # never reached: the runs must be identical
        np.testing.assert_array_equal(plain.metrics["entropy"], capped.metrics["entropy"])
    assert (plain.metrics["dual_clip_frac"] == 0).all()
