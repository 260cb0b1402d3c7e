"""Property tests (hypothesis): random and extreme inputs never give NaN or inf.

Extreme means log-ratios up to ±1e4 (clamped to ±20 inside), all-negative and
all-zero advantages, a single token, float32/float64/bfloat16. The one stat that
may be +inf is a pos/neg ratio with no negative mass (documented: "nothing to
balance"): ``pos_neg_ratio`` always, and ``rho``/``rho_before``/``rho_target`` when a
rule uses balance="pos_neg".
"""
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss, policy_loss_runs

RULES = [Symmetric(), Symmetric(eps=0.5), ClipHigher(), BAPO(), BAPO(count="all"), BAPO(order="lower_first"),
         BAPO(balance="pos_neg", rho0=0.667), BAPO.authors_code(), BAPO(low_range=(0.6, 1.0), high_range=(1.0, 3.0))]
AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
MAY_BE_INF = {"pos_neg_ratio"}
RHO_KEYS = {"rho", "rho_before", "rho_target"}

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def batches(draw):
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, 5))
    n = B * T
    kind = draw(st.sampled_from(["mild", "huge", "mixed"]))
    span = {"mild": 3.0, "huge": 1e4, "mixed": 1e4}[kind]
    if kind == "mixed":
        lr = draw(st.lists(st.one_of(st.floats(-3, 3), st.sampled_from([-1e4, 1e4, -21.0, 21.0, 0.0])),
                           min_size=n, max_size=n))
    else:
        lr = draw(st.lists(st.floats(-span, span), min_size=n, max_size=n))
    adv_kind = draw(st.sampled_from(["any", "all_negative", "all_positive", "all_zero", "per_sequence"]))
    if adv_kind == "any":
        adv = draw(st.lists(st.floats(-100, 100), min_size=n, max_size=n))
    elif adv_kind == "all_negative":
        adv = draw(st.lists(st.floats(-100, -1e-3), min_size=n, max_size=n))
    elif adv_kind == "all_positive":
        adv = draw(st.lists(st.floats(1e-3, 100), min_size=n, max_size=n))
    elif adv_kind == "all_zero":
        adv = [0.0] * n
    else:
        adv = draw(st.lists(st.floats(-3, 3), min_size=B, max_size=B))
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    mask[draw(st.integers(0, n - 1))] = True
    old = draw(st.lists(st.floats(-30, 0), min_size=n, max_size=n))
    return B, T, lr, adv, adv_kind, mask, old


def _tensors(batch, dtype):
    B, T, lr, adv, adv_kind, mask, old = batch
    old_t = torch.tensor(old, dtype=torch.float64).reshape(B, T)
    logp = (old_t + torch.tensor(lr, dtype=torch.float64).reshape(B, T)).to(dtype)
    adv_t = torch.tensor(adv, dtype=dtype).reshape(B, -1) if adv_kind != "per_sequence" else torch.tensor(adv, dtype=dtype)
    return logp, old_t.to(dtype), adv_t, torch.tensor(mask).reshape(B, T)


def _check_stats(stats, rule):
    for k, v in stats.items():
        assert not math.isnan(v), k
        if k in MAY_BE_INF or (k in RHO_KEYS and rule.balance == "pos_neg"):
            assert v >= 0, k
        else:
            assert math.isfinite(v), (k, v)
    if rule.balance == "share":
        assert 0 <= stats["rho"] <= 1 and 0 <= stats["rho_before"] <= 1
    for k in ("clip_frac_low", "clip_frac_high", "clip_frac", "dual_clip_frac", "neg_adv_frac", "pos_adv_frac"):
        assert 0 <= stats[k] <= 1, k
    assert stats["c_low"] <= 1 <= stats["c_high"]
    assert stats["pos_mass"] >= 0 and stats["neg_mass"] >= 0
    assert stats["ratio_max"] <= math.exp(20.0) * (1 + 1e-6)
    assert stats["ratio_min"] >= math.exp(-20.0) * (1 - 1e-6)
    if stats["neg_mass"] == 0:
        assert stats["pos_neg_ratio"] == math.inf
        assert stats["rho"] == (1.0 if rule.balance == "share" else math.inf)


@SETTINGS
@given(batch=batches(), dtype=st.sampled_from([torch.float32, torch.float64]),
       rule=st.sampled_from(RULES), agg=st.sampled_from(AGGS), dual_clip=st.sampled_from([None, 3.0]))
def test_never_nan_or_inf(batch, dtype, rule, agg, dual_clip):
    logp, old, adv, mask = _tensors(batch, dtype)
    logp.requires_grad_(True)
    loss, stats = policy_loss(logp, old, adv, mask, rule, agg=agg, dual_clip=dual_clip)
    loss.backward()
    assert torch.isfinite(loss)
    assert logp.grad is not None and logp.grad.dtype == dtype
    assert torch.isfinite(logp.grad).all()
    _check_stats(stats, rule)
    # masked tokens and tokens past the ±20 log-ratio clamp get no gradient
    assert torch.all(logp.grad[~mask] == 0)
    far = (logp.detach().double() - old.double()).abs() > 20.5
    assert torch.all(logp.grad[far] == 0)
    if batch[4] == "all_zero":
        assert loss.item() == 0 and torch.all(logp.grad == 0)
        assert stats["pos_mass"] == stats["neg_mass"] == 0 and stats["search_steps"] == 0


@SETTINGS
@given(batch=batches(), rule=st.sampled_from(RULES), agg=st.sampled_from(AGGS))
def test_bfloat16_inputs_and_gradients(batch, rule, agg):
    logp, old, adv, mask = _tensors(batch, torch.bfloat16)
    logp.requires_grad_(True)
    loss, stats = policy_loss(logp, old, adv, mask, rule, agg=agg)
    loss.backward()
    assert loss.dtype == torch.float32                      # computed in float32
    assert logp.grad.dtype == torch.bfloat16
    assert torch.isfinite(loss) and torch.isfinite(logp.grad.float()).all()
    _check_stats(stats, rule)
    # same numbers as the float32 computation on the same (bf16-rounded) values
    lp32 = logp.detach().float().requires_grad_(True)
    loss32, stats32 = policy_loss(lp32, old.float(), adv.float(), mask, rule, agg=agg)
    loss32.backward()
    assert loss.item() == loss32.item()
    torch.testing.assert_close(logp.grad, lp32.grad.to(torch.bfloat16))
    assert stats["c_low"] == stats32["c_low"] and stats["c_high"] == stats32["c_high"]


def test_bfloat16_gradient_flows():
    # a plain case where the gradient is known: on-policy, token-mean: −A/n, representable in bf16
    logp = torch.full((2, 2), -1.0, dtype=torch.bfloat16, requires_grad=True)
    adv = torch.tensor([1.0, -2.0], dtype=torch.bfloat16)
    loss, _ = policy_loss(logp, logp.detach().clone(), adv, torch.ones(2, 2, dtype=torch.bool), BAPO())
    loss.backward()
    expected = torch.tensor([[-0.25, -0.25], [0.5, 0.5]], dtype=torch.bfloat16)
    assert torch.equal(logp.grad, expected)


@settings(max_examples=30, deadline=None)
@given(batch=batches(), rule=st.sampled_from(RULES), runs=st.integers(1, 3))
def test_runs_never_nan(batch, rule, runs):
    logp, old, adv, mask = _tensors(batch, torch.float32)
    stack = lambda x: torch.stack([x] * runs)
    lp = stack(logp).requires_grad_(True)
    loss, stats = policy_loss_runs(lp, stack(old), stack(adv), stack(mask), rule)
    loss.sum().backward()
    assert torch.isfinite(loss).all() and torch.isfinite(lp.grad).all()
    for k, v in stats.items():
        assert not torch.isnan(v).any(), k
    assert torch.all(loss == loss[0])                        # identical runs, identical results


@SETTINGS
@given(batch=batches(), rule=st.sampled_from([r for r in RULES if isinstance(r, BAPO)]))
def test_bapo_bounds_in_range_or_capped(batch, rule):
    logp, old, adv, mask = _tensors(batch, torch.float64)
    _, s = policy_loss(logp, old, adv, mask, rule)
    (a_lo, b_lo), (a_hi, b_hi) = rule.low_range, rule.high_range
    assert a_lo - 1e-12 <= s["c_low"] <= b_lo + 1e-12
    assert a_hi - 1e-12 <= s["c_high"] <= b_hi + 1e-12
    if s["rho"] < rule.rho0:
        assert s["rho_reached"] == 0
        assert (s["c_low"], s["c_high"]) == pytest.approx(rule.path()[-1], abs=1e-12)
    else:
        assert s["rho_reached"] == 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_single_token(dtype):
    for rule in RULES:
        for lr in (-1e4, -0.5, 0.0, 0.5, 1e4):
            for a in (1.0, -1.0, 0.0):
                logp = torch.tensor([[lr - 2.0]], dtype=dtype, requires_grad=True)
                loss, s = policy_loss(logp, torch.tensor([[-2.0]], dtype=dtype), torch.tensor([a], dtype=dtype),
                                      torch.ones(1, 1), rule, dual_clip=3.0)
                loss.backward()
                assert torch.isfinite(loss) and torch.isfinite(logp.grad.float()).all(), (rule, lr, a)
                _check_stats(s, rule)
                assert s["n_tokens"] == 1
