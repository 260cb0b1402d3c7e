"""toy_rl.bandit.views and what they draw (toy_rl.bandit.demos, .measures, .replay): the plots and slider
callbacks of notebooks 01-03 return figures, their numbers move with the sliders, and they are the library's
numbers (explain_update, verify, simulate, BAPO.search)."""
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from toy_rl.bandit import (BanditConfig, bounds_ablation, explain_update, per_seed_summary, simulate, sweep,
                           verify)
from toy_rl.bandit.quadrants import QUADRANTS
from toy_rl.bandit.demos import demo_instance, same_instances
from toy_rl.bandit.measures import per_batch_volatility, roughness, runs_table, search_moved, x_axis
from toy_rl.bandit.presets import get_preset
from toy_rl.bandit.replay import (readings_table, replay_batches, replay_regime, rho_against_bound, rho_readings,
                                  search_landing)
from toy_rl.bandit.verdicts import bapo_regime
from toy_rl.bandit.views import (ablation_figure, entropy_rule_scatter, entropy_vs_reward, error_vs_eta,
                                 explain_callback, explain_view, quadrant_bars, quick_callback, quick_compare,
                                 readings_figure, rho_bound_figure, rule_bands, staleness_curves)
from toy_rl.bandit.views.training import ALL_RULE_METRICS, RULE_METRICS
from toy_rl.plotting import fixed_bounds, format_rows
from toy_rl.clipping import BAPO, Symmetric
from toy_rl.clipping.balance import balance_of, masses

SMALL = BanditConfig(steps=40)


# --- notebook 01 ------------------------------------------------------------------------------------

def test_explain_view_matches_explain_update_and_moves_with_every_slider():
    inst = demo_instance()
    base_fig, base = explain_view(0.8, 1.2, eta=0.1, pg="natural", instance=inst)
    assert isinstance(base_fig, Figure)
    e = explain_update(inst["logits"], inst["behaviour_logits"], inst["advantages"], fixed_bounds(0.8, 1.2), 0.1, "natural")
    assert base["exact"] == pytest.approx(e["exact"]) and base["first_order"] == pytest.approx(e["first_order"])
    assert base["paper"] == pytest.approx(e["paper"]) and base["C"] == pytest.approx(e["C"])
    assert base["clipped"] == e["clipped"].nonzero()[0].tolist() == [4, 5, 7]
    _, wide_high = explain_view(0.8, 2.5, eta=0.1, instance=inst)      # tokens 5 and 7 come back
    assert wide_high["clipped"] == [4] and wide_high["exact"] > base["exact"] and wide_high["C"] != base["C"]
    _, wide_low = explain_view(0.6, 1.2, eta=0.1, instance=inst)       # token 4 comes back and sharpens
    assert wide_low["clipped"] == [5, 7] and wide_low["exact"] < base["exact"]
    _, small_eta = explain_view(0.8, 1.2, eta=0.01, instance=inst)
    assert small_eta["first_order"] == pytest.approx(base["first_order"] / 10)     # linear in η
    assert small_eta["exact"] != pytest.approx(base["exact"] / 10, rel=0.01)       # the exact change is not
    assert abs(small_eta["exact"] - small_eta["first_order"]) < abs(base["exact"] - base["first_order"]) / 50
    _, vanilla = explain_view(0.8, 1.2, eta=0.1, pg="vanilla", instance=inst)
    assert vanilla["exact"] != pytest.approx(base["exact"])


def test_explain_callback_returns_the_summary_and_shows_a_figure(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    cb = explain_callback()
    a, b = cb(0.8, 1.2, 0.1, "natural"), cb(0.8, 2.5, 0.1, "natural")
    assert len(shown) == 2 and all(isinstance(f, Figure) for f in shown)
    assert a["clipped"] != b["clipped"] and a["exact"] != b["exact"]


@pytest.fixture(scope="module")
def reports():
    return verify(instances=800, seed=3), verify(instances=800, seed=3, baseline="behaviour")


def test_scatter_signs_are_verifys(reports):
    report, _ = reports
    fig, signs = entropy_rule_scatter(instances=800, seed=3, eta=report["eta_ref"])
    assert isinstance(fig, Figure)
    for form in ("paper_natural", "paper_vanilla", "paper_form_on_vanilla_step"):
        assert signs[form] == pytest.approx(report["forms"][form]["sign_agreement"]), form
    assert signs["paper_form_on_vanilla_step"] < signs["paper_vanilla"]


def test_error_vs_eta_slopes_are_verifys(reports):
    report, behaviour = reports
    fig, slopes = error_vs_eta(report, behaviour)
    assert isinstance(fig, Figure)
    for form in ("first_order_vanilla", "first_order_natural", "paper_natural", "paper_vanilla"):
        assert slopes[form] == report["forms"][form]["error_slope"]
        assert 1.8 < slopes[form] < 2.2
    assert slopes["paper_vanilla_behaviour_baseline"] < 1.5


def test_same_instances_rows_add_up_and_respond_to_the_bounds():
    rows = same_instances({"sym": Symmetric(), "wide": fixed_bounds(0.6, 2.0), "bapo": BAPO()}, instances=600, seed=1)
    assert rows["sym"]["c_low"] == pytest.approx(0.8) and rows["sym"]["c_high"] == pytest.approx(1.2)
    assert rows["wide"]["clip_frac"] < rows["sym"]["clip_frac"]
    for row in rows.values():
        for pg in ("natural", "vanilla"):                            # the quadrants add up to the first-order ΔH
            assert sum(row[q][f"dH_{pg}"] for q in QUADRANTS) == pytest.approx(row[f"first_order_{pg}"], rel=1e-9)
    fig, table = quadrant_bars(rows)
    assert isinstance(fig, Figure) and set(table) == set(rows)
    assert table["sym"]["low_p_low_A"]["clip_frac"] == rows["sym"]["low_p_low_A"]["clip_frac"]
    for name, row in rows.items():                                   # per instance: the means above, instance by instance
        assert row["per_instance"]["exact_natural"].mean() == pytest.approx(row["exact_natural"])
        assert row["per_instance"]["c_high"].shape == (600,)
    assert "rho_before" in rows["bapo"]["per_instance"] and "rho_before" not in rows["sym"]["per_instance"]
    moved = (rows["bapo"]["per_instance"]["c_high"] > 1.2 + 1e-9) | (rows["bapo"]["per_instance"]["c_low"] > 0.6 + 1e-9)
    np.testing.assert_array_equal(moved, rows["bapo"]["per_instance"]["rho_before"] < 0.4)   # BAPO() searches iff ρ < ρ0
    # the same instances, so the one-step ladder is monotone in c_high
    ladder = same_instances({h: fixed_bounds(0.8, h) for h in (1.2, 1.5, 2.0)}, instances=600, seed=1)
    assert ladder[1.2]["exact_natural"] < ladder[1.5]["exact_natural"] < ladder[2.0]["exact_natural"]


# --- notebook 02 ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def results():
    return sweep(SMALL, stalenesses=(0, 2), seeds=range(3))


def test_quick_compare_is_simulate_and_moves_with_the_sliders():
    fig, a = quick_compare(2, 0.4, SMALL, seeds=range(3), steps=30)
    assert isinstance(fig, Figure) and set(a) == {"symmetric", "clip-higher", "bapo"}
    direct = per_seed_summary(simulate(BanditConfig(steps=30, staleness=2), BAPO(rho0=0.4), range(3)))
    assert a["bapo"]["mean_reward"] == pytest.approx(direct["mean_reward"].mean(), abs=1e-4)
    _, b = quick_compare(2, 0.8, SMALL, seeds=range(3), steps=30)    # ρ0 moves BAPO only
    assert b["symmetric"] == a["symmetric"] and b["bapo"]["c_high"] > a["bapo"]["c_high"]
    _, c = quick_compare(0, 0.4, SMALL, seeds=range(3), steps=30)    # on-policy: all rules the same
    assert c["symmetric"]["mean_reward"] == c["clip-higher"]["mean_reward"] == c["bapo"]["mean_reward"]
    assert c["symmetric"]["mean_reward"] != a["symmetric"]["mean_reward"]


def test_quick_callback_shows_a_figure(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    summary = quick_callback(SMALL, seeds=range(2), steps=20)(2, 0.5)
    assert isinstance(shown[0], Figure) and "bapo" in summary


def test_staleness_curves_and_rule_bands_report_the_runs_numbers(results):
    runs = {k: results[k, "symmetric"] for k in (0, 2)}
    fig, at = staleness_curves(runs)
    assert isinstance(fig, Figure)
    q = SMALL.steps // 4
    for k, run in runs.items():
        assert at[k]["entropy_at_update"] == pytest.approx(run.curve("entropy", True)[:, q].mean())
    # "samples": half of what the stalest run saw; the on-policy run got there in as many updates
    assert at[0]["samples"] == at[2]["samples"] == (math.ceil(SMALL.steps / 3) * 32) // 2
    fig, means = rule_bands(results, 2)
    assert isinstance(fig, Figure)
    for rule in ("symmetric", "clip-higher", "bapo"):
        assert means[rule]["expected_reward"] == pytest.approx(results[2, rule].metrics["expected_reward"].mean())
    assert means["clip-higher"]["c_high"] == pytest.approx(1.28)
    assert isinstance(entropy_vs_reward(runs)[0], Figure)


def test_rule_bands_draws_four_panels_unless_asked_for_more(results):
    """Issue 25's figure hygiene: at most four panels where the message is one comparison (entropy, reward, ρ
    and the bounds, what notebook 02 §4 discusses); the other panels on request, with their means."""
    assert RULE_METRICS == ("entropy", "expected_reward", "rho", "bounds")
    fig, means = rule_bands(results, 2)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 4
    assert [ax.get_ylabel() for ax in shown] == ["entropy H (nats)", "expected reward",
                                                 "ρ (share of grad-carrying mass)", "bounds c_low, c_high"]
    assert "clip_frac_low" not in means["bapo"] and "c_high" in means["bapo"]
    assert any(line.get_label() == "ρ0 = 0.4" for line in shown[2].lines)
    fig, means = rule_bands(results, 2, ALL_RULE_METRICS)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 7
    assert means["bapo"]["clip_frac_high"] == pytest.approx(np.nanmean(results[2, "bapo"].curve("clip_frac_high")))
    fig, means = rule_bands(results, 2, metrics=["grad_norm"])
    assert len(fig.axes) == 1 and set(means["bapo"]) == {"grad_norm"}
    with pytest.raises(ValueError, match="unknown metrics"):
        rule_bands(results, 2, metrics=("entropy", "reward"))


@pytest.mark.parametrize("metrics", [RULE_METRICS, ALL_RULE_METRICS])
def test_rule_bands_keep_bands_in_range_and_every_rule_visible(results, metrics):
    """Issue 25's figure hygiene: a band never leaves what its quantity can take (clip fractions, reward in
    [0, 1], entropy >= 0), and each rule's line has its own marker, so a line drawn over another still shows."""
    fig, _ = rule_bands(results, 2, metrics)
    for ax in fig.axes:
        title = ax.get_ylabel()
        if any(word in title for word in ("clip fraction", "expected reward", "entropy")):
            low = min(c.get_paths()[0].vertices[:, 1].min() for c in ax.collections if c.get_paths())
            assert low >= 0, title
            if "clip fraction" in title or "reward" in title:
                assert max(c.get_paths()[0].vertices[:, 1].max() for c in ax.collections if c.get_paths()) <= 1
    first = fig.axes[0]
    markers = [line.get_marker() for line in first.lines if not line.get_label().startswith("_")]
    assert len(markers) == 3 and len(set(markers)) == 3


def test_x_axis_volatility_and_roughness(results):
    stale, on = results[2, "symmetric"], results[0, "symmetric"]
    assert x_axis(stale, "sample")[:4].tolist() == [32, 32, 32, 64]
    assert x_axis(stale, "sample", with_initial=True)[0] == 0
    np.testing.assert_allclose(per_batch_volatility(on), per_seed_summary(on)["reward_volatility"])
    assert per_batch_volatility(stale).shape == (3,)
    flat = np.abs(np.diff(stale.curve("grad_norm"), axis=1)).mean(1)
    np.testing.assert_allclose(roughness(stale), flat)


# --- notebook 03 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["reuse", "lag"])
def test_replay_reproduces_the_runs_own_rho_and_bounds(mode):
    config = BanditConfig(steps=30, staleness=3, mode=mode)
    n = 3
    sym = simulate(config, "symmetric", range(n), keep_logits=True)
    b = replay_batches(sym)
    rho = rho_readings(b, 0.8, 1.2)["grad share"].reshape(config.steps, n).T
    ok = np.isfinite(sym.metrics["rho"])
    np.testing.assert_allclose(rho[ok], sym.metrics["rho"][ok], atol=1e-12)
    assert np.array_equal(np.isnan(rho), ~ok)
    for rule in (BAPO(), BAPO.authors_code()):
        run = simulate(config, rule, range(n), keep_logits=True)
        s = rule.search(*replay_batches(run)[:3])
        np.testing.assert_allclose(s["c_high"].numpy().reshape(config.steps, n).T, run.metrics["c_high"])
        np.testing.assert_allclose(s["c_low"].numpy().reshape(config.steps, n).T, run.metrics["c_low"])


@pytest.mark.parametrize("mode", ["reuse", "lag"])
def test_replay_of_multi_token_answers_reproduces_the_runs_own_rho_bounds_and_regime(mode):
    config = replace(get_preset("long-failures"), steps=24, staleness=3, mode=mode)     # 4 tokens right, 8 wrong
    n = 3
    sym = simulate(config, "symmetric", range(n), keep_logits=True)
    assert sym.cont_history.shape == sym.logits_history.shape and len(sym.cont_behaviour_history) == config.steps
    b = replay_batches(sym)
    assert b.ratio.shape == (config.steps * n, config.n_contexts * config.group_size * config.max_len)
    lengths = b.mask.reshape(config.steps * n, -1, config.max_len).sum(-1)
    assert set(lengths.unique().tolist()) <= {config.answer_len, config.wrong_len}
    pad = b.mask == 0
    assert pad.any() and (b.adv[pad] == 0).all() and (b.ratio[pad] == 1).all()
    readings = rho_readings(b, 0.8, 1.2)
    rho = readings["grad share"].reshape(config.steps, n).T
    ok = np.isfinite(sym.metrics["rho"])
    np.testing.assert_allclose(rho[ok], sym.metrics["rho"][ok], atol=1e-12)
    assert isinstance(readings_figure(b, readings)[0], Figure)
    for rule in (BAPO(), BAPO(count="all"), BAPO.authors_code()):
        run = simulate(config, rule, range(n), keep_logits=True)
        batches = replay_batches(run)
        s = rule.search(*batches[:3])
        np.testing.assert_allclose(s["c_high"].numpy().reshape(config.steps, n).T, run.metrics["c_high"])
        np.testing.assert_allclose(s["c_low"].numpy().reshape(config.steps, n).T, run.metrics["c_low"])
        assert replay_regime(batches, rule) == bapo_regime([run])
        moved = ((run.metrics["c_low"] > rule.low_range[0] + 1e-9) | (run.metrics["c_high"] > rule.high_range[0] + 1e-9))
        np.testing.assert_allclose(search_moved(run), moved.mean(1))
    assert (search_moved(sym) == 0).all()                                  # fixed bounds never leave their own
    with pytest.raises(ValueError, match="continuation"):
        replay_batches(replace(sym, cont_history=None))


def test_replay_needs_the_logits():
    with pytest.raises(ValueError, match="keep_logits"):
        replay_batches(simulate(BanditConfig(steps=5), "symmetric", range(2)))


@pytest.fixture(scope="module")
def batches():
    return replay_batches(simulate(BanditConfig(steps=60, staleness=4), "symmetric", range(4), keep_logits=True))


def test_rho_readings_are_the_balance_of_the_masses(batches):
    r = rho_readings(batches, 0.7, 1.5)
    keep = np.isfinite(r["grad share"])
    for count in ("grad", "all"):
        pos, neg = masses(batches.ratio, batches.adv, batches.mask, 0.7, 1.5, count)
        np.testing.assert_allclose(r[f"{count} share"][keep], balance_of(pos, neg, "share").numpy()[keep])
        share, ratio = r[f"{count} share"][keep], r[f"{count} pos/neg"][keep]
        fin = np.isfinite(ratio)
        np.testing.assert_allclose(ratio[fin] / (1 + ratio[fin]), share[fin])
    pos, neg = masses(batches.ratio, batches.adv, batches.mask, 0.7, 1.5, "all")
    lit = (pos / (pos - neg).abs()).numpy()
    both = keep & np.isfinite(lit) & np.isfinite(r["Eq. 8 literal"])
    np.testing.assert_allclose(r["Eq. 8 literal"][both], lit[both])
    table = readings_table(r)
    assert table["grad share"]["below_target"] == pytest.approx(np.mean(r["grad share"][keep] < 0.4))
    assert table["grad pos/neg"]["target"] == pytest.approx(0.667)
    fig, per_update = readings_figure(batches, r)
    assert isinstance(fig, Figure) and len(per_update["grad share"]) == 60


def test_raising_c_low_raises_rho_only_when_counting_gradient_carrying_tokens(batches):
    lows = np.round(np.arange(0.6, 0.901, 0.05), 3)
    grad = rho_against_bound(batches, "c_low", lows, 1.2, "grad")
    every = rho_against_bound(batches, "c_low", lows, 1.2, "all")
    rows = np.isfinite(grad[:, 0])
    assert np.all(np.diff(grad[rows], axis=1) >= -1e-12) and np.all(np.diff(every[rows], axis=1) <= 1e-12)
    assert (grad[rows, -1] > grad[rows, 0]).any() and (every[rows, -1] < every[rows, 0]).any()
    highs = [1.2, 1.6, 2.0]
    for count in ("grad", "all"):
        up = rho_against_bound(batches, "c_high", highs, 0.6, count)[rows]
        assert np.all(np.diff(up, axis=1) >= -1e-12)
    fig, curves = rho_bound_figure(batches)
    assert isinstance(fig, Figure)
    np.testing.assert_allclose(curves["c_low", "grad", "all batches"][[0, -1]],
                               np.nanmean(rho_against_bound(batches, "c_low", [0.6, 0.9], 1.2, "grad"), 0))
    with pytest.raises(ValueError, match="which"):
        rho_against_bound(batches, "c_mid", [1.0], 1.2, "grad")


def test_search_landing_is_the_rules_search(batches):
    rules = {"paper": BAPO(), "all": BAPO(count="all"), "code": BAPO.authors_code()}
    land = search_landing(batches, rules)
    keep = (batches.adv != 0).any(1)
    for name, rule in rules.items():
        s = rule.search(batches.ratio[keep], batches.adv[keep], batches.mask[keep])
        assert land[name]["c_high"] == pytest.approx(float(s["c_high"].mean()))
        assert land[name]["steps"] == pytest.approx(float(s["stop"].double().mean()))
        assert 0 <= land[name]["reached"] <= 1 and land[name]["rho_after"] >= land[name]["rho_before"] - 1e-12
    assert land["paper"]["moved"] > 0 and land["all"]["moved"] <= land["paper"]["moved"]


def test_runs_table_and_ablation_figure_are_per_seed_summary():
    runs = {"paper": simulate(SMALL, BAPO(), range(3)), "pos_neg": simulate(SMALL, BAPO(balance="pos_neg", rho0=1.0), range(3)),
            "sym": simulate(SMALL, "symmetric", range(3))}
    table = runs_table(runs)
    for name, run in runs.items():
        assert table[name]["mean_reward"] == pytest.approx(per_seed_summary(run)["mean_reward"].mean())
        assert 0 <= table[name]["rho_share"] <= 1
    assert math.isnan(table["sym"]["reached"]) and table["sym"]["low_moved"] == 0
    abl = {2: bounds_ablation(BanditConfig(steps=30, staleness=2), bounds=((0.8, 1.2), (0.8, 2.0), (0.6, 1.2)), seeds=range(3))}
    fig, numbers = ablation_figure(abl)
    assert isinstance(fig, Figure)
    for b, run in abl[2].items():
        assert numbers[2][b]["final_entropy"] == pytest.approx(per_seed_summary(run)["final_entropy"].mean())


def test_small_helpers():
    with pytest.raises(ValueError, match="c_low"):
        fixed_bounds(1.0, 1.2)
    text = format_rows({"a": {"x": 1.0, "y": "n/a"}}, ("x", "y"))
    assert "1.000" in text and "n/a" in text
    assert torch.allclose(demo_instance()["advantages"].mul(demo_instance()["logits"].softmax(-1)).sum(),
                          torch.zeros((), dtype=torch.float64), atol=1e-12)
