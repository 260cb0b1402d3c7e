"""Statistics over seeds, shared by every rung: Student-t 95% bands, Welch's and paired t-tests, Holm's
correction, the seed count a paired test needs, and the mean of what was measured (:func:`mean_ignoring_nan`).

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


def mean_ignoring_nan(values) -> float:
    """Mean of the measured values: None and NaN mean "not measured" and are left out (±inf is kept); NaN,
    without a warning, when nothing was measured. ``values``: any nesting of numbers (a list, an array)."""
    v = np.array([math.nan if x is None else x for x in np.ravel(np.asarray(values, dtype=object))], dtype=float)
    v = v[~np.isnan(v)]
    return float(v.mean()) if v.size else math.nan


def _rounding(*samples) -> float:
    """What counts as float rounding for these samples: a billionth of their largest magnitude (0 for all zeros),
    so "no spread" and "identical" mean the same for data in [0, 1e-12] as for data in [0, 1e6]."""
    return 1e-9 * max((float(np.max(np.abs(x))) for x in samples if np.size(x)), default=0.0)


def _one_dimensional(x, name: str) -> np.ndarray:
    x = np.asarray(x, float)
    if x.ndim != 1:
        raise ValueError(f"{name}: one value per seed (a 1-D sequence) is needed; got an array of shape {x.shape}")
    return x


def welch_test(a, b) -> tuple[float, float]:
    """Welch's t-test of two samples (NaNs dropped): (t, p). Identical samples give (0, 1).

    When neither sample has any spread (up to float rounding) but they differ, t is undefined (±inf) and p is the
    exact permutation test: of the C(n+m, n) equally likely ways to split the n+m values, the observed one (every a
    on one side of every b) and its mirror are the two most extreme, p = 2 / C(n+m, n) -- two seeds a side that
    agree give p = 1/3, never 0.
    """
    a, b = _one_dimensional(a, "a"), _one_dimensional(b, "b")
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    tol = _rounding(a, b)
    if np.ptp(a) <= tol and np.ptp(b) <= tol:              # no spread on either side: no t statistic
        if abs(a.mean() - b.mean()) <= tol:
            return 0.0, 1.0
        return math.copysign(math.inf, a.mean() - b.mean()), min(1.0, 2.0 / math.comb(len(a) + len(b), len(a)))
    if np.array_equal(np.sort(a), np.sort(b)):
        return 0.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        t, p = stats.ttest_ind(a, b, equal_var=False)
    return float(t), float(p)


def paired_test(a, b) -> dict:
    """Paired t-test of ``a`` against ``b``, matched by seed (index): the same seed gives both rules the same
    initial weights and first rollout, so the per-seed difference removes that shared noise.

    Pairs with a NaN on either side are dropped. Returns ``{"n", "diff", "diff_lo", "diff_hi", "t", "p"}``:
    the mean difference a − b with its Student-t 95% interval, and the two-sided p-value
    (scipy.stats.ttest_rel). Identical samples give diff 0, p 1; fewer than 2 pairs give NaNs. When every
    pair differs by the same non-zero amount (up to float rounding) the t statistic is undefined, and p is the
    exact two-sided sign test, 2·0.5ⁿ: two seeds that agree can never be significant (p = 0.5), ten can.
    "Rounding" is relative to the data's scale (a billionth of its largest value), so multiplying both samples
    by 10⁶ changes no p-value. ``a`` and ``b`` must be 1-D, one value per seed.
    """
    a, b = _one_dimensional(a, "a"), _one_dimensional(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"paired samples need one value per seed on both sides; got shapes {a.shape} and {b.shape}")
    keep = np.isfinite(a) & np.isfinite(b)
    d = a[keep] - b[keep]
    out = {"n": int(len(d)), "diff": math.nan, "diff_lo": math.nan, "diff_hi": math.nan, "t": math.nan, "p": math.nan}
    if len(d) == 0:
        return out
    mean, lo, hi = confidence_band(d)
    out.update(diff=float(mean), diff_lo=float(lo), diff_hi=float(hi))
    if len(d) < 2:
        return out
    tol = _rounding(a[keep], b[keep])
    if np.ptp(d) <= tol:                                    # every pair differs by the same amount (up to rounding)
        if np.max(np.abs(d)) <= tol:                        # often identical runs: no difference at all
            out.update(t=0.0, p=1.0)
        else:  # no spread, so no t; the exact sign test: n differences of one sign, p = 2 * 0.5**n
            out.update(t=math.copysign(math.inf, d[0]), p=min(1.0, 2.0 * 0.5 ** len(d)))
        return out
    t, p = stats.ttest_rel(a[keep], b[keep])
    out.update(t=float(t), p=float(p))
    return out


def holm(pvalues) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (controls the family-wise error rate).

    Sort the m p-values ascending, multiply the i-th (0-based) by m − i, carry the running maximum so the
    adjusted values stay in order, cap at 1. NaNs stay NaN and do not count towards m.
    """
    p = np.asarray(list(pvalues), float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = len(idx)
    running = 0.0
    for rank, i in enumerate(idx[np.argsort(p[idx], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return [float(v) for v in out]


def seeds_for_effect(effect: float, sd_diff: float, alpha: float = 0.05, power: float = 0.8,
                     max_seeds: int = 10_000) -> int:
    """Seeds a paired t-test needs to detect a mean difference ``effect`` when per-seed differences have
    standard deviation ``sd_diff`` (two-sided ``alpha``, the given ``power``; noncentral t, exact).

    E.g. to see 3 points of accuracy when paired differences scatter by 4 points: seeds_for_effect(0.03, 0.04).
    """
    if not (effect > 0 and sd_diff > 0):
        raise ValueError(f"effect and sd_diff must be > 0; got effect={effect!r}, sd_diff={sd_diff!r}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must lie in (0, 1); got alpha={alpha!r}, power={power!r}")
    for n in range(2, max_seeds + 1):
        df = n - 1
        crit = stats.t.ppf(1 - alpha / 2, df)
        nc = effect / sd_diff * math.sqrt(n)
        if stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc) >= power:
            return n
    raise ValueError(f"more than {max_seeds} seeds needed for effect {effect} at sd {sd_diff}")
