"""The pilot gate (docs/protocol.md, section 2): its summary by hand, and the regime it names on the presets."""
import math

import numpy as np
import pytest

from toy_rl.bandit.pilot import pilot
from toy_rl.experiments.pilot import pilot_summary
from toy_rl.bandit.presets import CONTROL, DEFAULT, PRESETS
from toy_rl.clipping import Symmetric

NAN = float("nan")


def test_summary_by_hand():
    rho = [[0.30, 0.35, NAN, 0.50]]                     # 2 of 3 defined updates below 0.4
    c_low = [[0.60, 0.62, 0.60, 0.60]]
    c_high = [[3.00, 3.00, 1.20, 1.20]]                 # moved in the first half only
    s = pilot_summary(rho, c_low, c_high, [[0.1, 0.0, 0.0, 0.1]], [[0.0, 0.2, 0.0, 0.2]], [[1e-3] * 4],
                      lambda_mass=[[2.0, 2.0, NAN, 1.0]], rho_start_grad=rho, rho_start_all=[[0.3, 0.3, NAN, 0.5]])
    assert s["regime"] == "negatives-dominate"
    assert s["rho_below_target_frac"] == pytest.approx(2 / 3) and s["rho_defined_frac"] == 0.75
    assert s["search_moved_frac"] == 0.5 and s["search_moved_frac_early"] == 1.0 and s["search_moved_frac_late"] == 0.0
    assert s["c_high_mean"] == pytest.approx(2.1) and s["c_low_mean"] == pytest.approx(0.605)
    assert s["c_high_mean_defined"] == pytest.approx(2.4) and s["c_low_mean_defined"] == pytest.approx(1.82 / 3)
    assert s["clip_frac_low"] == pytest.approx(0.05) and s["clip_frac_high"] == pytest.approx(0.1)
    assert s["approx_kl"] == pytest.approx(1e-3) and s["updates"] == 4
    assert s["lambda"]["q50"] == 2.0 and s["lambda"]["mean"] == pytest.approx(5 / 3)
    assert s["rho_start"]["grad"]["q50"] == pytest.approx(0.35) and s["rho_start"]["all"]["q50"] == pytest.approx(0.3)
    assert s["rho_before"]["q10"] == pytest.approx(np.quantile([0.3, 0.35, 0.5], 0.1))


def test_summary_balanced_and_ties():
    flat = lambda v: np.full(4, v)
    s = pilot_summary([0.5, 0.45, 0.3, 0.6], flat(0.6), flat(1.2), flat(0), flat(0), flat(0))
    assert s["regime"] == "balanced" and s["search_moved_frac"] == 0.0 and "lambda" not in s
    half = pilot_summary([0.3, 0.3, 0.5, 0.5], flat(0.6), flat(1.2), flat(0), flat(0), flat(0))
    assert half["regime"] == "balanced"                                 # a majority means more than half
    empty = pilot_summary([NAN, NAN], [0.6, 0.6], [1.2, 1.2], [0, 0], [0, 0], [0, 0])
    assert empty["regime"] == "balanced" and math.isnan(empty["rho_below_target_frac"])
    other_start = pilot_summary([0.3, 0.3], [0.8, 0.8], [1.2, 1.3], [0, 0], [0, 0], [0, 0], start=(0.8, 1.2))
    assert other_start["search_moved_frac"] == 0.5
    with pytest.raises(ValueError, match="shape"):
        pilot_summary([0.3, 0.3], [0.6], [1.2, 1.2], [0], [0], [0])


def test_gate_on_the_control_and_on_the_default_preset():
    """Issue 11's done-when for rung 1: the default preset is in the regime where BAPO's search runs."""
    control = pilot(PRESETS[CONTROL])
    assert control["regime"] == "balanced" and control["search_moved_frac"] < 0.5
    default = pilot(PRESETS[DEFAULT])
    assert default["regime"] == "negatives-dominate"
    assert default["search_moved_frac"] >= 0.5 and default["c_high_mean"] >= 1.5
    assert default["lambda"]["q50"] == pytest.approx(2.0) and control["lambda"]["q50"] == pytest.approx(1.0)
    assert default["symmetric"]["approx_kl"] > 0 and default["config"]["staleness"] == 2


def test_pilot_needs_bapo():
    with pytest.raises(ValueError, match="rule"):
        pilot(PRESETS[CONTROL], rule=Symmetric())
