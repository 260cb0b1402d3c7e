"""What every rung's default comparison computes once its runs are in (docs/protocol.md §3-6), written once.

    paired_seeds(seeds), reference_first(rules)  the seeds every rule shares, BAPO's runs first
    realised_bounds(c_low, c_high, could_clip)    BAPO's mean bounds: the fixed control "fixed@bapo-mean"
    band_columns(name, values)                    a table row's mean over seeds with its 95% band
    paired_columns(reference, other, endpoints)   BAPO − rule per endpoint, paired by seed, p before Holm
    with_family_p(rows, verdicts, endpoints)      each row's p_holm from the verdicts' one Holm family
    seeds_needed(rows, effect, endpoint)          the seeds a paired test needs at the table's scatter

Each rung keeps what is its own: how its runs are stored (rung 1: arrays (seeds, updates); rungs 2 and 3: one
list of records per seed), which updates count as "a bound could clip", and its row's extra columns
(:mod:`toy_rl.bandit.comparison`, :mod:`toy_rl.arithmetic.comparison`, :mod:`toy_rl.lm.comparison`).
"""
from __future__ import annotations

import math

import numpy as np

from ..stats import confidence_band, paired_test, seeds_for_effect


def paired_seeds(seeds) -> list:
    """``seeds`` as a list, checked: a comparison needs at least 2 distinct seeds, since its tests pair the rules'
    runs by seed (seed k of every rule starts from the same weights and draws the same first rollout)."""
    seeds = list(seeds)
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise ValueError(f"a comparison needs at least 2 distinct seeds (tests pair runs by seed); got {seeds}")
    return seeds


def reference_first(rules: dict, reference: str = "bapo") -> dict:
    """{label: rule} with the reference (BAPO) first, the others in their order: BAPO's runs give the bounds of
    the fixed rule at its mean (:func:`realised_bounds`), which runs after them."""
    return dict(sorted(rules.items(), key=lambda kv: kv[0] != reference))


def realised_bounds(c_low, c_high, could_clip) -> tuple[float, float]:
    """BAPO's realised mean (c_low, c_high): the mean of the bounds its search chose (Algorithm 1 of BAPO,
    arXiv 2510.18927) over the seeds and the updates in ``could_clip`` (a boolean mask of the same shape: the
    updates where a bound could clip, which each rung defines), rounded to 4 places. The fixed rule at these bounds
    is the control of claim 6 (:func:`toy_rl.experiments.controls.mean_bounds_rule`). ValueError when no update
    could clip: BAPO's bounds never mattered."""
    could_clip = np.asarray(could_clip, dtype=bool)
    if not could_clip.any():
        raise ValueError("BAPO's runs have no update where a bound could clip (stale, with advantage mass): "
                         "its bounds never mattered")
    lo, hi = np.asarray(c_low)[could_clip], np.asarray(c_high)[could_clip]
    return round(float(lo.mean()), 4), round(float(hi.mean()), 4)


def band_columns(name: str, values) -> dict:
    """{name, name_lo, name_hi}: the mean of ``values`` (one per seed; NaN: not measured) and its Student-t 95%
    band (:func:`toy_rl.stats.confidence_band`)."""
    mean, lo, hi = confidence_band(values)
    return {name: float(mean), f"{name}_lo": float(lo), f"{name}_hi": float(hi)}


def paired_columns(reference: dict, other: dict, endpoints, sd: bool = False) -> dict:
    """The columns of a table row testing the reference rule (BAPO) against the row's rule, per endpoint:
    ``diff_<e>`` (mean over seeds of reference − rule), its 95% interval ``diff_<e>_lo``/``_hi`` and ``p_<e>`` (a
    t-test paired by seed, :func:`toy_rl.stats.paired_test`; before Holm); with ``sd``, also ``sd_diff_<e>``, the
    spread of the per-seed differences (what :func:`seeds_needed` reads). ``reference``, ``other``:
    {endpoint: values}, the same seeds in the same order on both sides (the caller pairs them)."""
    out = {}
    for name in endpoints:
        a, b = reference[name], other[name]
        test = paired_test(a, b)
        out[f"diff_{name}"], out[f"p_{name}"] = test["diff"], test["p"]
        out[f"diff_{name}_lo"], out[f"diff_{name}_hi"] = test["diff_lo"], test["diff_hi"]
        if sd:
            d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
            out[f"sd_diff_{name}"] = float(np.nanstd(d, ddof=1)) if len(d) > 1 else np.nan
    return out


def with_family_p(rows: list, verdicts: list, endpoints, reference: str = "bapo", cell_of=lambda row: "") -> list:
    """Write into each table row (BAPO − the row's rule) the p_holm of the same test in the rung's one Holm family
    (the verdicts' tests, :func:`toy_rl.verdicts.family_p_holm`), as ``p_holm_<endpoint>``: the table and the
    verdicts print the same number. A row whose test is not in the family (a control no claim uses, or a rule
    identical to another) gets NaN: its difference is shown with its interval, untested."""
    from ..verdicts import family_p_holm
    found = family_p_holm(verdicts)
    for row in rows:
        for name in endpoints:
            if f"diff_{name}" in row:
                row[f"p_holm_{name}"] = found.get((cell_of(row), name, reference, row["rule"]), math.nan)
    return rows


def seeds_needed(rows: list, effect: float = 0.03, endpoint: str = "auc_accuracy") -> int | None:
    """Seeds a paired test needs to see ``effect`` (3 points of accuracy: the low end of the paper's gaps,
    Fig. 11) at the median scatter of the per-seed differences in ``rows`` (``sd_diff_<endpoint>``,
    :func:`paired_columns` with ``sd``; :func:`toy_rl.stats.seeds_for_effect`); None without two seeds."""
    sds = [r[f"sd_diff_{endpoint}"] for r in rows if np.isfinite(r.get(f"sd_diff_{endpoint}", np.nan))]
    return seeds_for_effect(effect, float(np.median(sds))) if sds and np.median(sds) > 0 else None
