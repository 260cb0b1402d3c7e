"""Bad input raises ValueError, and the message names the argument at fault."""
import math

import pytest
import torch

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, make_rule, policy_loss, policy_loss_runs


@pytest.mark.parametrize("eps", [0, 0.0, -0.1, 1.0, 1.5, math.nan, "0.2"])
def test_symmetric_bad_eps(eps):
    with pytest.raises(ValueError, match=r"^eps must"):
        Symmetric(eps=eps)


@pytest.mark.parametrize("kw, name", [
    (dict(eps_low=-0.1), "eps_low"), (dict(eps_low=0), "eps_low"), (dict(eps_low=1.0), "eps_low"),
    (dict(eps_high=0), "eps_high"), (dict(eps_high=-0.28), "eps_high"), (dict(eps_high=math.nan), "eps_high"),
])
def test_clip_higher_bad_eps(kw, name):
    with pytest.raises(ValueError, match=rf"^{name} must"):
        ClipHigher(**kw)


@pytest.mark.parametrize("kw, pattern", [
    (dict(low_range=(0.9, 0.6)), r"low_range is in the wrong order"),
    (dict(high_range=(3.0, 1.2)), r"high_range is in the wrong order"),
    (dict(high_range=(0.8, 2.0)), r"high_range must lie at or above 1"),
    (dict(low_range=(0.6, 1.3)), r"low_range must lie in \(0, 1\]"),
    (dict(low_range=(0.0, 0.9)), r"low_range must lie in \(0, 1\]"),
    (dict(low_range=(0.6,)), r"low_range must be a pair"),
    (dict(high_range=(1.2, math.inf)), r"high_range must be a pair of finite"),
    (dict(rho0=0), r"rho0 must lie in \(0, 1\)"),
    (dict(rho0=1.2), r"rho0 must lie in \(0, 1\)"),
    (dict(rho0=1.0), r"rho0 must lie in \(0, 1\)"),
    (dict(rho0=0, balance="pos_neg"), r"rho0 must be a finite number > 0"),
    (dict(rho0=math.inf, balance="pos_neg"), r"rho0 must be a finite number > 0"),
    (dict(low_step=0), r"low_step must be a number > 0"),
    (dict(low_step=-0.02), r"low_step must be a number > 0"),
    (dict(high_step=0), r"high_step must be a number > 0"),
    (dict(high_step=math.nan), r"high_step must be a number > 0"),
    (dict(order="upper"), r"order must be one of"),
    (dict(count="grads"), r"count must be one of"),
    (dict(balance="ratio"), r"balance must be one of"),
])
def test_bapo_bad_settings(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        BAPO(**kw)


def test_bapo_settings_that_are_fine():
    # rho0 above 1 is a valid pos/neg target; a range may be a single point; c_low may reach 1.
    BAPO(rho0=1.2, balance="pos_neg")
    BAPO(low_range=(0.8, 0.8), high_range=(1.0, 1.0))
    BAPO(low_range=(0.6, 1.0))


def test_make_rule_unknown_name():
    with pytest.raises(ValueError, match=r"unknown rule 'dapo'"):
        make_rule("dapo")


def _good(B=2, T=3):
    logp = -torch.rand(B, T, dtype=torch.float64)
    return logp, logp - 0.1, torch.randn(B, T, dtype=torch.float64), torch.ones(B, T)


@pytest.mark.parametrize("which, bad, pattern", [
    ("old_logp", torch.zeros(2, 4), r"old_logp has shape \(2, 4\) but logp has \(2, 3\)"),
    ("mask", torch.ones(3, 2), r"mask has shape \(3, 2\) but logp has \(2, 3\)"),
    ("advantages", torch.zeros(3), r"advantages must be shaped"),
    ("advantages", torch.zeros(2, 2), r"advantages must be shaped"),
    ("advantages", torch.zeros(2, 3, 1), r"advantages must be shaped"),
    ("logp", torch.zeros(2, 3, 4), r"logp must be shaped \(batch, tokens\).*policy_loss_runs"),
    ("logp", torch.zeros(6), r"logp must be shaped \(batch, tokens\)"),
    ("logp", [[0.0, 0.0, 0.0]], r"logp must be a torch.Tensor"),
    ("advantages", torch.zeros(2, 3, dtype=torch.long), r"advantages must be a floating-point tensor"),
    ("logp", torch.tensor([[0.0, math.nan, 0.0], [0.0] * 3]), r"logp contains NaN or inf"),
    ("logp", torch.tensor([[0.0, -math.inf, 0.0], [0.0] * 3]), r"logp contains NaN or inf"),
    ("old_logp", torch.tensor([[0.0, 0.0, math.inf], [0.0] * 3]), r"old_logp contains NaN or inf"),
    ("advantages", torch.tensor([[0.0, 0.0, 0.0], [math.nan, 0, 0]]), r"advantages contain NaN or inf"),
    ("advantages", torch.tensor([math.inf, 0.0]), r"advantages contain NaN or inf"),
    ("mask", torch.zeros(2, 3), r"mask is all zero"),
    ("mask", torch.zeros(2, 3, dtype=torch.bool), r"mask is all zero"),
    ("mask", torch.full((2, 3), 0.5), r"mask must hold only 0 and 1"),
])
def test_policy_loss_bad_tensors(which, bad, pattern):
    logp, old, adv, mask = _good()
    args = dict(logp=logp, old_logp=old, advantages=adv, mask=mask)
    args[which] = bad
    with pytest.raises(ValueError, match=pattern):
        policy_loss(args["logp"], args["old_logp"], args["advantages"], args["mask"], Symmetric())


def test_nan_in_a_masked_position_still_raises():
    # A NaN never slips through silently, even where the mask is 0 (it would poison the masked sum's gradient).
    logp, old, adv, mask = _good()
    logp[0, 0] = math.nan
    mask[0, 0] = 0
    with pytest.raises(ValueError, match=r"logp contains NaN"):
        policy_loss(logp, old, adv, mask, BAPO())


@pytest.mark.parametrize("agg", ["mean", "token_mean", "seq-mean", ""])
def test_unknown_agg(agg):
    with pytest.raises(ValueError, match=r"agg must be one of"):
        policy_loss(*_good(), Symmetric(), agg=agg)


@pytest.mark.parametrize("c", [1, 1.0, 0.5, 0, -3.0, "3"])
def test_bad_dual_clip(c):
    with pytest.raises(ValueError, match=r"dual_clip must be None or a number > 1"):
        policy_loss(*_good(), Symmetric(), dual_clip=c)


def test_runs_errors():
    logp, old, adv, mask = (x[None].expand(2, -1, -1).clone() for x in _good())
    with pytest.raises(ValueError, match=r"logp must be shaped \(runs, batch, tokens\)"):
        policy_loss_runs(logp[0], old[0], adv[0], mask[0], BAPO())
    mask[1] = 0
    with pytest.raises(ValueError, match=r"mask is all zero in at least one run"):
        policy_loss_runs(logp, old, adv, mask, BAPO())


@pytest.mark.parametrize("runs", [False, True])
def test_grad_requiring_old_logp_or_advantages_refused(runs):
    # policy_loss(h, h, ...) used to give a normal loss and an exactly zero gradient: now a clear error.
    logp, old, adv, mask = (x[None].clone() if runs else x for x in _good())
    fn = policy_loss_runs if runs else policy_loss
    h = logp.clone().requires_grad_(True)
    with pytest.raises(ValueError, match=r"^old_logp requires grad; pass old_logp\.detach\(\)"):
        fn(h, h, adv, mask, BAPO())
    with pytest.raises(ValueError, match=r"^advantages require grad; pass advantages\.detach\(\)"):
        fn(h, old, adv.clone().requires_grad_(True), mask, Symmetric())
    loss, _ = fn(h, h.detach(), adv, mask, Symmetric())          # the fix the message names
    loss.sum().backward()
    assert h.grad.abs().sum() > 0


def test_a_loss_that_overflows_float32_is_refused_not_minus_inf():
    """Issue 30: advantages of 1e38 gave loss = -inf, silently."""
    import pytest
    import torch
    from toy_rl.clipping import Symmetric, policy_loss
    logp = torch.zeros(2, 3, requires_grad=True)
    with pytest.raises(ValueError, match="overflowed"):
        policy_loss(logp, torch.zeros(2, 3), torch.full((2, 1), 1e38), torch.ones(2, 3), rule=Symmetric())
    loss, _ = policy_loss(logp, torch.zeros(2, 3), torch.full((2, 1), 1e30), torch.ones(2, 3), rule=Symmetric())
    assert torch.isfinite(loss)
