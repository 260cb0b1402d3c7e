"""Numbers read off rung-3 run summaries (:func:`toy_rl.experiments.run_summaries`: numbers and ``curves``) for
notebook 06 and the rung-3 verdicts: curves, runs grouped by (staleness, rule), per-run volatility and roughness, shares of
updates where negatives dominate, BAPO's reach where the search had work, and a stored batch re-clipped at other
bounds. Views draw these; :mod:`toy_rl.lm.verdicts` tests them.
"""
from __future__ import annotations

import math

import numpy as np

from ..clipping import BAPO, policy_loss
from ..plotting import fixed_bounds
from ..stats import mean_ignoring_nan
from ..threads import single_thread
from ..verdicts import RHO0, reached_when_needed


def curve_of(summary: dict, name: str):
    """(steps, values) of one curve of a run summary; "accuracy" is the held-out curve."""
    pts = summary["accuracy_curve"] if name == "accuracy" else summary.get("curves", {}).get(name, [])
    if not pts:
        return np.array([]), np.array([])
    a = np.asarray(pts, dtype=float)
    return a[:, 0], a[:, 1]


def mean_curve(summaries: list[dict], name: str):
    """Mean over runs (seeds) of one curve, on the steps every run has."""
    curves = [dict(zip(*curve_of(s, name))) for s in summaries]
    steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    return np.array(steps, dtype=float), np.array([np.mean([c[x] for c in curves]) for x in steps])


def group_runs(runs: list[dict]) -> dict:
    """{(staleness, rule): [summaries over seeds]} from :func:`toy_rl.experiments.run_summaries`."""
    out: dict = {}
    for s in runs:
        out.setdefault((s["staleness"], s["rule"]), []).append(s)
    return out


def average(ss: list[dict], key: str) -> float:
    """Mean over runs of a summary number (runs without it left out)."""
    return mean_ignoring_nan([s.get(key) for s in ss])


def run_volatility(summary: dict, name: str = "reward_mean") -> float:
    """Standard deviation of the update-to-update change of one run's curve (NaN with fewer than 3 points)."""
    _, y = curve_of(summary, name)
    return float(np.std(np.diff(y))) if len(y) > 2 else math.nan


def volatility(ss: list[dict], name: str = "reward_mean") -> float:
    """:func:`run_volatility` averaged over runs."""
    return mean_ignoring_nan([run_volatility(s, name) for s in ss])


def roughness(summary: dict, name: str = "grad_norm") -> float:
    """Mean |change from one update to the next| of one run's curve (the paper's "smoother gradient norm")."""
    _, y = curve_of(summary, name)
    return float(np.mean(np.abs(np.diff(y)))) if len(y) > 1 else math.nan


def entropy_drop(summary: dict) -> float:
    """Entropy over the first 5 updates minus over the last 5 (nats): how far it fell."""
    first, last = summary.get("entropy_first"), summary.get("entropy_last")
    return math.nan if first is None or last is None else first - last


def _aligned(summary: dict, *names):
    """The curves ``names`` of one run on the updates where all of them were logged."""
    curves = [dict(zip(*curve_of(summary, n))) for n in names]
    steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
    return [np.array([c[x] for x in steps], dtype=float) for c in curves]


def dominance_shares(summary: dict) -> dict:
    """Over one run's updates: the share with more A < 0 than A > 0 tokens (updates with neither left out) and the
    share where A < 0 tokens carry most of the gradient-carrying loss, ρ < 0.5 (same updates):
    {"count": ..., "mass": ...}."""
    neg, pos, rho = _aligned(summary, "neg_adv_frac", "pos_adv_frac", "rho")
    informative = (neg + pos) > 0                   # an update with no advantage at all has no balance to speak of
    return {"count": float(np.mean(neg[informative] > pos[informative])) if informative.any() else math.nan,
            "mass": float(np.mean(rho[informative] < 0.5)) if informative.any() else math.nan}


def reached_share(summary: dict, rho0: float = RHO0) -> float:
    """Of one BAPO run's updates whose ρ before the search was below ``rho0``, the share where the search brought
    ρ to ``rho0`` (:func:`toy_rl.verdicts.reached_when_needed`); NaN if none needed it."""
    before, after = _aligned(summary, "rho_before", "rho")
    return float(reached_when_needed(before[None], after[None], rho0)[0]) if before.size else math.nan


def bapo_updates(ss: list[dict]) -> dict:
    """ρ before the search and the bounds over every update of these runs that had advantages at all, concatenated:
    {"rho_before", "c_low", "c_high"} (for :func:`toy_rl.verdicts.regime_of`)."""
    names = ("rho_before", "c_low", "c_high")
    parts = [_aligned(s, "neg_adv_frac", "pos_adv_frac", *names) for s in ss]
    keep = [(p[0] + p[1]) > 0 for p in parts]
    return {n: np.concatenate([p[2 + i][k] for p, k in zip(parts, keep)]) if parts else np.array([])
            for i, n in enumerate(names)}


def clip_stats(batch: dict, rule) -> dict:
    """:func:`toy_rl.clipping.policy_loss`'s numbers for a stored batch (:func:`toy_rl.lm.run.load_batch`) under
    ``rule``, with the batch's own aggregation."""
    with single_thread():
        _, stats = policy_loss(batch["logp"], batch["old_logp"], batch["advantages"], batch["mask"].float(), rule,
                               agg=batch.get("agg", "token-mean"))
    return stats


def reclip(batch: dict, c_low: float, c_high: float, grid=None) -> dict:
    """A stored batch re-clipped: ``here`` at [c_low, c_high], ``bapo`` where BAPO()'s search stops on it, and
    ``sweep``, the numbers at every c_high of ``grid`` (default 1.02 to 3.0 by 0.02) with this c_low."""
    grid = np.round(np.arange(1.0 + 0.02, 3.0 + 1e-9, 0.02), 4) if grid is None else np.asarray(grid, dtype=float)
    return dict(here=clip_stats(batch, fixed_bounds(c_low, c_high)), bapo=clip_stats(batch, BAPO()), grid=grid,
                sweep=[clip_stats(batch, fixed_bounds(c_low, float(h))) for h in grid])
