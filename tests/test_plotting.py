"""toy_rl.plotting (what every rung's views share) and toy_rl.stats.mean_ignoring_nan: one smoothing that skips
missing points, one colour per rule label with a fallback for any other label, bands over seeds, one rule-name list."""
import math

import numpy as np
import pytest
from matplotlib.figure import Figure

from toy_rl import clipping
from toy_rl.plotting import (RULE_COLOURS, RULE_NAMES, band, colour_of, fixed_bounds, format_rows, smooth,
                             window_label)
from toy_rl.stats import confidence_band, mean_ignoring_nan


def trailing_mean(v, window):
    """The plain trailing mean, shorter at the start (what every copy of smooth did on NaN-free data)."""
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, len(v) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def test_smooth_is_the_trailing_mean_and_skips_missing_points():
    v = np.random.default_rng(0).normal(size=30)
    for w in (1, 2, 5, 40):
        np.testing.assert_allclose(smooth(v, w), trailing_mean(v, w))
    np.testing.assert_allclose(smooth(np.vstack([v, 2 * v]), 5)[1], trailing_mean(2 * v, 5))   # row by row
    gap = np.array([1.0, np.nan, 3.0, 5.0, 7.0, 9.0])
    np.testing.assert_allclose(smooth(gap, 2), [1.0, 1.0, 3.0, 4.0, 6.0, 8.0])
    assert np.isfinite(smooth(gap, 3)).all()                # one missing update does not blank the rest
    assert np.isnan(smooth(np.array([np.nan, np.nan, 1.0]), 2)[:2]).all()
    assert smooth(np.array([]), 5).size == 0


def test_colours_are_one_mapping_with_a_fallback_for_any_label():
    assert RULE_NAMES == tuple(clipping.RULES) == ("symmetric", "clip-higher", "bapo")
    assert [colour_of(r) for r in RULE_NAMES] == [RULE_COLOURS[r] for r in RULE_NAMES]
    assert colour_of("reuse-4") == "tab:purple" and colour_of("partial-8") == "tab:orange"
    others = [colour_of(label, i) for i, label in enumerate(("fixed-0.6-1.2", "bapo-rho0.5", "[0.8, 2.0]"))]
    assert len(set(others)) == 3 and not set(others) & set(RULE_COLOURS.values())
    assert colour_of("fixed-0.6-1.2", 1) == colour_of("anything", 1)


def test_band_draws_the_mean_and_its_student_t_band():
    values = np.random.default_rng(1).normal(size=(5, 12))
    ax = Figure().subplots()
    mean = band(ax, np.arange(12), values, "tab:blue", "x", window=3)
    m, lo, hi = confidence_band(smooth(values, 3))
    np.testing.assert_allclose(mean, m)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), m)
    assert len(ax.collections) == 1 and window_label(3) == " (mean of 3)" and window_label(1) == ""


def test_band_is_cut_to_what_the_quantity_can_take_and_markers_keep_coinciding_lines_visible():
    """Issue 25: a clip fraction's band over 3 seeds reached below 0; BAPO's c_high hid symmetric's."""
    from toy_rl.plotting import RANGES
    values = np.array([[0.0, 0.01, 0.0], [0.02, 0.0, 0.03], [0.0, 0.0, 0.0]])
    ax = Figure().subplots()
    band(ax, np.arange(3), values, "C0", limits=RANGES["clip_frac_low"], marker="s")
    lo = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert lo.min() == 0.0 and confidence_band(values)[1].min() < 0       # cut at 0, where the raw band is not
    assert ax.lines[0].get_marker() == "s"
    open_band = Figure().subplots()
    band(open_band, np.arange(3), values, "C0")
    assert open_band.collections[0].get_paths()[0].vertices[:, 1].min() < 0


def test_fixed_bounds_and_format_rows():
    rule = fixed_bounds(0.6, 2.0)
    assert (rule.c_low, rule.c_high) == pytest.approx((0.6, 2.0))
    with pytest.raises(ValueError, match="0 < c_low < 1 < c_high"):
        fixed_bounds(1.0, 1.2)
    text = format_rows({"a": {"x": 1.0, "y": "n/a"}}, ("x", "y"))
    assert "1.000" in text and "n/a" in text


def test_mean_ignoring_nan():
    assert mean_ignoring_nan([1.0, None, 3.0, float("nan")]) == 2.0
    assert mean_ignoring_nan(np.array([[1.0, np.nan], [3.0, 5.0]])) == 3.0
    assert math.isnan(mean_ignoring_nan([])) and math.isnan(mean_ignoring_nan([None, np.nan]))
    assert mean_ignoring_nan([1.0, math.inf]) == math.inf


VIEW_MODULES = ("toy_rl.bandit.views.entropy_rule", "toy_rl.bandit.views.training", "toy_rl.bandit.views.balance",
                "toy_rl.arithmetic.views.training", "toy_rl.arithmetic.views.batches", "toy_rl.lm.views.runs",
                "toy_rl.lm.views.batch")
COMPUTES = {("toy_rl.rl.loop", "update"), ("toy_rl.rl.loop", "train"), ("toy_rl.bandit.simulate", "simulate"),
            ("toy_rl.stats", "welch_test"), ("toy_rl.stats", "paired_test"), ("toy_rl.stats", "holm")}


@pytest.mark.parametrize("name", VIEW_MODULES)
def test_views_only_draw(name):
    """A views module trains nothing and tests nothing itself (the library's measures, demos and verdicts do), and
    stays short."""
    import importlib
    import inspect
    mod = importlib.import_module(name)
    used = {(getattr(obj, "__module__", None), getattr(obj, "__name__", None)) for obj in vars(mod).values()
            if callable(obj)}
    assert not used & COMPUTES, f"{name} imports {used & COMPUTES}"
    assert len(inspect.getsource(mod).splitlines()) < 400


def test_markers_of_coinciding_lines_sit_at_different_points():
    from matplotlib.figure import Figure
    from toy_rl.plotting import MARKERS, band
    ax = Figure().subplots()
    values = np.tile(np.linspace(0, 1, 40), (3, 1))          # three rules on exactly the same curve
    for i in range(3):
        band(ax, np.arange(40), values, f"C{i}", marker=MARKERS[i])
    marked = [set(np.arange(40)[line.get_markevery()[0]::line.get_markevery()[1]]) for line in ax.get_lines()]
    assert all(len(m) >= 7 for m in marked)
    assert not (marked[0] & marked[1]) and not (marked[1] & marked[2]) and not (marked[0] & marked[2])
