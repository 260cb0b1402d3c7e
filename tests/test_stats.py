"""Paired tests, Holm's correction and seed counts (toy_rl.stats), against scipy and hand-worked cases."""
import math

import numpy as np
import pytest
from scipy import stats as st

from toy_rl.stats import holm, paired_test, seeds_for_effect, welch_test


def test_paired_test_matches_scipy_and_names_the_direction():
    rng = np.random.default_rng(0)
    a = rng.normal(0.5, 0.05, 12)
    b = a - 0.03 + rng.normal(0, 0.01, 12)
    r = paired_test(a, b)
    ref = st.ttest_rel(a, b)
    assert r["n"] == 12 and r["t"] == pytest.approx(ref.statistic) and r["p"] == pytest.approx(ref.pvalue)
    assert r["diff"] > 0 and r["diff_lo"] < r["diff"] < r["diff_hi"]
    assert paired_test(b, a)["diff"] == pytest.approx(-r["diff"])


def test_paired_beats_welch_when_seeds_share_noise():
    rng = np.random.default_rng(1)
    seed_noise = rng.normal(0, 0.1, 10)               # shared by both rules of a seed
    a, b = 0.6 + seed_noise + 0.02, 0.6 + seed_noise + rng.normal(0, 0.005, 10)
    assert paired_test(a, b)["p"] < 0.01 < st.ttest_ind(a, b, equal_var=False).pvalue


def test_paired_test_drops_nan_pairs_and_handles_ties():
    r = paired_test([1.0, 2.0, np.nan, 4.0], [0.5, np.nan, 3.0, 3.5])
    assert r["n"] == 2 and r["diff"] == pytest.approx(0.5) and r["p"] == 0.5   # sign test: 2 · 0.5²
    assert paired_test([0.1 + 0.2] * 10, [0.1] * 10)["p"] == pytest.approx(2 * 0.5 ** 10)  # rounding is no spread
    assert paired_test([0.3, 0.4, 0.5], [0.4, 0.5, 0.6])["p"] == 0.25
    same = paired_test([0.3, 0.4, 0.5], [0.3, 0.4, 0.5])
    assert same["diff"] == 0 and same["p"] == 1.0
    assert math.isnan(paired_test([1.0], [0.0])["p"])
    with pytest.raises(ValueError, match="one value per seed"):
        paired_test([1, 2, 3], [1, 2])


def test_paired_test_judges_identical_relative_to_the_data_scale():
    """Issue 30: tiny data with a real spread was called "identical" (p = 1) under an absolute 1e-12, while the
    same data x 1e6 gave p = 0.013. Scaling both samples must change no p-value."""
    small = np.array([1e-13, 2e-13, 3e-13, 4e-13, 5e-13])
    tiny, big = paired_test(small, np.zeros(5)), paired_test(small * 1e6, np.zeros(5))
    assert tiny["p"] == pytest.approx(big["p"]) and tiny["p"] < 0.05
    assert paired_test(small * 1e12, small * 1e12 + 1e-4)["p"] == pytest.approx(2 * 0.5 ** 5)   # one shift: sign test
    with pytest.raises(ValueError, match="1-D"):
        paired_test(np.ones((3, 2)), np.zeros((3, 2)))


def test_welch_test_never_returns_p_zero_on_a_finite_zero_spread_difference():
    """Issue 24: welch_test([0.7, 0.7], [0.6, 0.6]) returned p = 0. With no spread on either side p is the exact
    permutation test, 2 / C(n + m, n)."""
    t, p = welch_test([0.7, 0.7], [0.6, 0.6])
    assert p == pytest.approx(2 / 6) and t == math.inf
    assert welch_test([0.6] * 5, [0.7] * 5)[1] == pytest.approx(2 / math.comb(10, 5))
    assert welch_test([0.1 + 0.2] * 3, [0.3] * 3) == (0.0, 1.0)                 # rounding is no difference
    assert welch_test([1e-13, 1e-13], [2e-13, 2e-13])[1] == pytest.approx(1 / 3)  # scale-free
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 0.1, 8), rng.normal(0.6, 0.1, 8)
    assert welch_test(a, b)[1] == pytest.approx(st.ttest_ind(a, b, equal_var=False).pvalue)
    with pytest.raises(ValueError, match="1-D"):
        welch_test(np.ones((3, 2)), np.zeros(3))


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.5 -> x4, x3, x2, x1 with a running maximum
    assert holm([0.01, 0.04, 0.03, float("nan"), 0.5])[:3] == pytest.approx([0.04, 0.09, 0.09])
    assert math.isnan(holm([0.01, float("nan")])[1])
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_seeds_for_effect_grows_with_noise_and_meets_power_by_simulation():
    n = seeds_for_effect(0.03, 0.04)
    assert seeds_for_effect(0.03, 0.08) > n > seeds_for_effect(0.03, 0.02)
    rng = np.random.default_rng(2)
    hits = [st.ttest_rel(d := rng.normal(0.03, 0.04, n), np.zeros(n)).pvalue < 0.05 for _ in range(2000)]
    assert 0.78 <= np.mean(hits) <= 0.9                   # power 0.8 at n, not far above
    with pytest.raises(ValueError, match="effect"):
        seeds_for_effect(0.0, 0.04)
