"""Statistics over seeds, shared by every rung: Student-t 95% bands and Welch's t-test.

Bands are mean ± t_{0.975, n−1}·s/√n over seeds (scipy.stats.t); rules are
compared with Welch's t-test (scipy.stats.ttest_ind, equal_var=False), one
value per seed as the samples.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats


def confidence_band(values, level: float = 0.95):
    """Mean and Student-t interval over seeds (axis 0), ignoring NaNs: returns (mean, lo, hi).

    ``values`` is (seeds,) or (seeds, steps). With fewer than 2 finite values the band is NaN.
    """
    v = np.asarray(values, dtype=float)
    n = np.sum(np.isfinite(v), axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(v, axis=0)
        sd = np.nanstd(v, axis=0, ddof=1)
        half = stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(np.maximum(n, 1))
    half = np.where(n >= 2, half, np.nan)
    return mean, mean - half, mean + half


def welch_test(a, b) -> tuple[float, float]:
    """Welch's t-test of two samples (NaNs dropped): (t, p). Identical samples give (0, 1)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    if np.array_equal(np.sort(a), np.sort(b)) or (np.ptp(a) == 0 and np.ptp(b) == 0 and a[0] == b[0]):
        return 0.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t, p = stats.ttest_ind(a, b, equal_var=False)
    return float(t), float(p)
