"""Named bandit configurations and the comparison helpers built on them."""
from dataclasses import replace

import numpy as np
import pytest

from toy_rl.bandit import BanditConfig
from toy_rl.bandit.comparison import (MEAN_BOUNDS, best_step, compare, control_rules, format_rows, matched_kl_step,
                                      realised_bounds, run_cell, tuned_comparison)
from toy_rl.clipping import BAPO
from toy_rl.bandit.presets import BASE_LR, CONTROL, DEFAULT, PRESETS, get_preset, long_answers


def test_control_is_the_untouched_default_and_the_default_has_long_failures():
    assert PRESETS[CONTROL] == BanditConfig() and CONTROL == "balanced"
    default = PRESETS[DEFAULT]
    assert default.wrong_len / default.answer_len > 1.5                 # on-policy ρ = 1/(1 + λ) < ρ0 = 0.4
    assert default.preset == "rare-correct" and default.staleness == 0
    assert PRESETS["trap"].preset == PRESETS["trap-long-failures"].preset == "trap"


def test_long_answers_scales_the_step_by_the_mean_length():
    cfg = long_answers(BanditConfig(), answer_len=4, length_ratio=2.0)
    assert (cfg.answer_len, cfg.wrong_len, cfg.lr) == (4, 8, BASE_LR * 6)
    assert long_answers(BanditConfig(), 1, 1.0).lr == BASE_LR
    assert long_answers(BanditConfig(preset="trap"), 2, 4.0).lr == BASE_LR * 5


def test_get_preset():
    assert get_preset("long-failures") is PRESETS["long-failures"]
    with pytest.raises(ValueError, match="preset"):
        get_preset("long")


def test_comparison_rows_pair_every_rule_with_bapo():
    rows = compare("long-failures", seeds=range(3), steps=12, cells=(("reuse", 2),))
    labels = [r["rule"] for r in rows]
    assert labels == list(control_rules()) + [MEAN_BOUNDS]
    bapo = rows[labels.index("bapo")]
    mean_fixed = rows[labels.index(MEAN_BOUNDS)]
    assert 0.6 <= mean_fixed["c_low"] <= 0.9 and 1.2 <= mean_fixed["c_high"] <= 3.0
    assert "p_final_reward" not in bapo
    for row in rows:
        assert row["regime"] == "negatives-dominate" and row["seeds"] == 3
        for name in ("final_reward", "p_best", "mean_reward"):
            if row["rule"] != "bapo":
                p, p_holm = row[f"p_{name}"], row[f"p_holm_{name}"]
                if name == "mean_reward":       # the primary endpoint: in the family when a claim tests the pair
                    assert np.isnan(p) or np.isnan(p_holm) or p_holm >= p
                else:                            # reported, not tested
                    assert np.isnan(p_holm)
                assert row[f"diff_{name}"] == pytest.approx(bapo[name] - row[name])
    assert "fixed@bapo-mean" in format_rows(rows)


def test_fixed_rule_at_bapos_mean_bounds_uses_the_updates_where_a_bound_can_clip():
    cfg = replace(PRESETS[DEFAULT], steps=30, staleness=2)
    runs = run_cell(cfg, {"bapo": BAPO()}, seeds=range(3))
    m = runs["bapo"].metrics
    active = np.isfinite(m["rho_before"]) & (m["staleness"] > 0)
    assert 0 < np.isfinite(m["rho_before"]).mean() < 1                  # some updates carry no gradient at all
    assert (m["c_high"][m["staleness"] == 0] != 1.2).any()              # on-policy updates move the bounds too
    fixed = runs[MEAN_BOUNDS].extra["rule_obj"]
    assert (fixed.lo, fixed.hi) == realised_bounds(runs["bapo"])
    assert fixed.lo == pytest.approx(m["c_low"][active].mean(), abs=1e-4)
    assert fixed.hi == pytest.approx(m["c_high"][active].mean(), abs=1e-4)
    assert abs(fixed.hi - m["c_high"][np.isfinite(m["rho_before"])].mean()) > 1e-3   # and that changes the mean


def test_step_helpers_by_hand():
    rows = [dict(rule="a", lr=1.0, final_reward=0.5, approx_kl=1e-3), dict(rule="a", lr=2.0, final_reward=0.7, approx_kl=4e-3),
            dict(rule="b", lr=1.0, final_reward=0.6, approx_kl=2e-3), dict(rule="b", lr=2.0, final_reward=0.6, approx_kl=8e-3)]
    assert best_step(rows) == {"a": 2.0, "b": 1.0}                      # ties go to the smaller step
    assert matched_kl_step(rows, target=1.5e-3) == {"a": 1.0, "b": 1.0}  # nearest in log
    assert matched_kl_step(rows, target=4e-3) == {"a": 2.0, "b": 1.0}
    tiny = tuned_comparison(replace(PRESETS[DEFAULT], steps=6), lrs=(1.0, 2.0), tune_seeds=range(100, 102),
                            seeds=range(2))
    assert set(tiny["best"]) == {"symmetric", "clip-higher", "bapo"} == set(tiny["best_at_edge"])   # 2-point grid
    assert [r["lr"] for r in tiny["rows_best"]] == [tiny["best"][r["rule"]] for r in tiny["rows_best"]]
    assert {r["lr"] for r in tiny["sweep"]} == {PRESETS[DEFAULT].lr, 2 * PRESETS[DEFAULT].lr}
    with pytest.raises(ValueError, match="disjoint"):
        tuned_comparison(replace(PRESETS[DEFAULT], steps=5), seeds=range(3), tune_seeds=range(2, 4))
