"""toy_rl.surrogate: the clipped surrogate (BAPO Eq. 3) checked by hand, against policy_loss, and traced."""
import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from toy_rl.clipping import BAPO, ClipHigher, Symmetric, policy_loss
from toy_rl.surrogate import (bapo_trace, carries_gradient, check_bounds, compare_rules, fixed_rule, format_table,
                              gradient_interval, plot_bapo_traces, plot_surrogate, rho_change_by_bound,
                              slider_callback, surrogate, surrogate_slope, surrogate_view)
from toy_rl.synthetic import stale_batch


@pytest.fixture(scope="module")
def batch():
    return stale_batch(n_prompts=8, max_tokens=32, drift=0.3, seed=1)


# --- values and slopes by hand, bounds [0.8, 1.2] ----------------------------------------------------

@pytest.mark.parametrize("r, adv, value, slope", [
    (1.0, 2.0, 2.0, 2.0),     # inside: r·A
    (1.5, 2.0, 2.4, 0.0),     # A > 0 above c_high: capped at 1.2·A, no gradient
    (0.5, 2.0, 1.0, 2.0),     # A > 0 below c_low: min keeps r·A, gradient flows
    (0.5, -1.0, -0.8, 0.0),   # A < 0 below c_low: capped at 0.8·A, no gradient
    (1.5, -1.0, -1.5, -1.0),  # A < 0 above c_high: min keeps r·A, gradient flows
    (1.0, 0.0, 0.0, 0.0),     # A = 0: nothing
])
def test_values_and_slopes_by_hand(r, adv, value, slope):
    assert surrogate(r, adv, 0.8, 1.2) == pytest.approx(value)
    assert surrogate_slope(r, adv, 0.8, 1.2) == pytest.approx(slope)


def test_dual_clip_caps_negative_tokens_only():
    assert surrogate(4.0, -1.0, 0.8, 1.2, dual_clip=3.0) == pytest.approx(-3.0)
    assert surrogate(2.0, -1.0, 0.8, 1.2, dual_clip=3.0) == pytest.approx(-2.0)
    assert surrogate(4.0, 1.0, 0.8, 1.2, dual_clip=3.0) == pytest.approx(1.2)
    assert surrogate_slope([2.0, 4.0], -1.0, 0.8, 1.2, dual_clip=3.0).tolist() == [-1.0, 0.0]


def test_slope_is_finite_difference():
    r = np.array([0.3, 0.7, 0.9, 1.1, 1.3, 2.5, 3.5])
    for adv in (1.5, -0.7):
        h = 1e-6
        fd = (surrogate(r + h, adv, 0.8, 1.2, 3.0) - surrogate(r - h, adv, 0.8, 1.2, 3.0)) / (2 * h)
        np.testing.assert_allclose(surrogate_slope(r, adv, 0.8, 1.2, 3.0), fd, atol=1e-6)


@pytest.mark.parametrize("bounds", [(0.8, 1.2), (0.7, 2.5)])
def test_matches_policy_loss_values_and_autograd(bounds):
    """One token per row: the core's loss is −mean(surrogate), its gradient wrt log r is −slope·r/N."""
    g = torch.Generator().manual_seed(0)
    log_r = (torch.rand(400, 1, generator=g, dtype=torch.float64) * 3 - 1.5)
    adv = torch.randn(400, generator=g, dtype=torch.float64)
    logp = log_r.clone().requires_grad_(True)
    loss, _ = policy_loss(logp, torch.zeros_like(log_r), adv, torch.ones_like(log_r), fixed_rule(*bounds), dual_clip=3.0)
    loss.backward()
    r, a = log_r.exp().squeeze(1).numpy(), adv.numpy()
    assert loss.item() == pytest.approx(-surrogate(r, a, *bounds, dual_clip=3.0).mean())
    np.testing.assert_allclose(-400 * logp.grad.squeeze(1).numpy() / r, surrogate_slope(r, a, *bounds, dual_clip=3.0), atol=1e-9)


# --- where gradient flows --------------------------------------------------------------------------

def test_gradient_region():
    r = np.array([0.5, 0.8, 1.0, 1.2, 1.5])
    assert carries_gradient(r, 1.0, 0.8, 1.2).tolist() == [True, True, True, True, False]
    assert carries_gradient(r, -1.0, 0.8, 1.2).tolist() == [False, True, True, True, True]
    assert not carries_gradient(r, 0.0, 0.8, 1.2).any()
    assert carries_gradient([2.9, 3.1], -1.0, 0.8, 1.2, dual_clip=3.0).tolist() == [True, False]


def test_bounds_count_as_unclipped_like_policy_loss():
    """A token exactly at c_high (A > 0) or c_low (A < 0) is not in policy_loss's clip fractions."""
    old = torch.zeros(2, 1, dtype=torch.float64)
    logp = torch.tensor([[math.log(1.2)], [math.log(0.8)]], dtype=torch.float64)
    _, stats = policy_loss(logp, old, torch.tensor([1.0, -1.0], dtype=torch.float64), torch.ones_like(old), Symmetric())
    assert stats["clip_frac"] == 0
    assert carries_gradient([1.2, 0.8], [1.0, -1.0], 0.8, 1.2).all()


def test_gradient_interval():
    assert gradient_interval(+1, 0.8, 1.2) == (0.0, 1.2)
    assert gradient_interval(-1, 0.8, 1.2) == (0.8, 3.0)
    assert gradient_interval(-1, 0.8, 1.2, r_range=(0, 4), dual_clip=3.0) == (0.8, 3.0)
    assert all(map(math.isnan, gradient_interval(-1, 0.8, 1.2, r_range=(0.0, 0.5))))
    with pytest.raises(ValueError, match="sign"):
        gradient_interval(0, 0.8, 1.2)


# --- errors ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("c_low, c_high, dual, match", [
    (0.0, 1.2, None, "c_low must lie in"), (-0.1, 1.2, None, "c_low must lie in"), (1.1, 1.2, None, "c_low must lie in"),
    (0.8, 0.9, None, "c_high must be >= 1"), (1.0, 1.0, None, "below c_high"), (math.nan, 1.2, None, "finite"),
    (0.8, math.inf, None, "finite"), ("0.8", 1.2, None, "finite"), (0.8, 1.2, 1.0, "dual_clip"),
])
def test_bad_bounds_raise(c_low, c_high, dual, match):
    with pytest.raises(ValueError, match=match):
        check_bounds(c_low, c_high, dual)
    with pytest.raises(ValueError, match=match):
        surrogate(1.0, 1.0, c_low, c_high, dual)


def test_edge_bounds_allowed():
    check_bounds(1.0, 1.2)
    check_bounds(0.8, 1.0)
    assert surrogate(1.5, 1.0, 1.0, 1.2) == pytest.approx(1.2)


# --- the figure and the slider callback ------------------------------------------------------------

def test_plot_surrogate_reports_gradient_widths():
    axes = Figure().subplots(1, 2)
    out = plot_surrogate(axes, 0.8, 1.2, r_range=(0.0, 3.0))
    assert out["pos"]["grad_width"] == pytest.approx(1.2)
    assert out["neg"]["grad_width"] == pytest.approx(2.2)
    assert len(axes[0].lines) >= 2 and len(axes[1].lines) >= 2
    wider = plot_surrogate(Figure().subplots(1, 2), 0.6, 2.0, r_range=(0.0, 3.0), dual_clip=2.5)
    assert wider["pos"]["grad_width"] == pytest.approx(2.0)
    assert wider["neg"]["grad_width"] == pytest.approx(1.9)


def test_surrogate_view_without_batch():
    fig, summary = surrogate_view(0.8, 1.2)
    assert isinstance(fig, Figure)
    assert summary == {"c_low": 0.8, "c_high": 1.2, "grad_width_pos": 1.2, "grad_width_neg": 2.2}


def test_slider_callback_numbers_follow_the_sliders(batch):
    callback = slider_callback(batch)
    base = callback(0.8, 1.2)
    higher = callback(0.8, 2.0)
    lower = callback(0.6, 1.2)
    assert set(base) >= {"c_low", "c_high", "clip_frac_low", "clip_frac_high", "rho", "loss", "grad_width_pos"}
    assert higher["clip_frac_high"] < base["clip_frac_high"] and higher["rho"] > base["rho"]
    assert higher["grad_width_pos"] > base["grad_width_pos"]
    assert lower["clip_frac_low"] < base["clip_frac_low"] and lower["rho"] < base["rho"]
    assert lower["clip_frac_high"] == base["clip_frac_high"]
    assert base["loss"] != higher["loss"] != lower["loss"]


def test_slider_callback_rejects_bad_bounds(batch):
    with pytest.raises(ValueError):
        slider_callback(batch)(1.3, 1.2)


# --- rules side by side and BAPO's search ----------------------------------------------------------

def test_on_policy_rules_agree():
    stats = compare_rules(stale_batch(n_prompts=4, max_tokens=16, drift=0.0),
                          {"s": Symmetric(), "c": ClipHigher(), "b": BAPO()})
    assert {s["clip_frac"] for s in stats.values()} == {0.0}
    assert len({round(s["loss"], 9) for s in stats.values()}) == 1
    table = format_table(stats)
    assert table.splitlines()[1].startswith("s ") and "clip_frac_high" in table


@pytest.mark.parametrize("rule", [BAPO(), BAPO(count="all"), BAPO(balance="pos_neg", rho0=1.0), BAPO.authors_code()],
                         ids=["paper", "eq8", "pos_neg", "authors"])
def test_bapo_trace_is_the_search_policy_loss_uses(batch, rule):
    rows = bapo_trace(batch, rule)
    _, stats = policy_loss(batch.logp, batch.old_logp, batch.advantages, batch.mask, rule)
    last = rows[-1]
    assert (last.c_low, last.c_high) == pytest.approx((stats["c_low"], stats["c_high"]))
    assert last.rho == pytest.approx(stats["rho"], rel=1e-5)
    assert [t.step for t in rows] == list(range(len(rows)))
    np.testing.assert_allclose([(t.c_low, t.c_high) for t in rows], rule.path()[:len(rows)], atol=1e-6)
    assert all(t.rho < rule.rho0 for t in rows[:-1])               # stops at the first point reaching ρ0
    assert len(rows) == len(rule.path()) or last.rho >= rule.rho0
    moved = rho_change_by_bound(rows)
    assert moved["c_high"] + moved["c_low"] == pytest.approx(last.rho - rows[0].rho, abs=1e-9)


def test_plot_bapo_traces(batch):
    traces = {"paper": (BAPO(), bapo_trace(batch, BAPO())), "authors": (BAPO.authors_code(), bapo_trace(batch, BAPO.authors_code()))}
    out = plot_bapo_traces(Figure().subplots(2, 2), traces)
    for name, (rule, rows) in traces.items():
        steps, lo, hi, rho, reached = out[name]
        assert (steps, lo, hi, rho) == (rows[-1].step, rows[-1].c_low, rows[-1].c_high, rows[-1].rho)
        assert reached == (rho >= rule.rho0)
