"""Numbers read off bandit runs for notebooks 02-03 and the rung-1 verdicts: x axes (updates, samples seen),
entropy at equal updates and equal samples, per-seed roughness and volatility, who dominates the batch, and the
per-run table of BAPO's variants. Views draw these; :mod:`toy_rl.bandit.verdicts` tests them.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..clipping import BAPO
from .experiments import per_seed_summary
from .simulate import BanditRun


def x_axis(run: BanditRun, axis: str = "update", with_initial: bool = False) -> np.ndarray:
    """x values for a run's per-update curves: "update" (1..T) or "sample" (samples seen, S·G per batch)."""
    c = run.config
    t = np.arange(0 if with_initial else 1, c.steps + 1)
    if axis == "update":
        return t
    if axis == "sample":
        if c.mode == "reuse":
            batches = np.where(t == 0, 0, (t - 1) // c.updates_per_batch + 1)
        else:
            batches = t
        return batches * c.n_contexts * c.group_size
    raise ValueError(f"axis must be 'update' or 'sample'; got {axis!r}")


def entropy_points(runs: dict) -> dict:
    """Per staleness, per seed: the entropy and expected reward after a quarter of the updates and after half the
    samples the run that saw the fewest samples saw in all. ``runs``: {staleness: BanditRun}.
    Returns {staleness: dict(update, samples, entropy_at_update, reward_at_update, entropy_at_samples,
    reward_at_samples)} with (seeds,) arrays."""
    ref = min(float(x_axis(run, "sample")[-1]) for run in runs.values()) / 2
    out = {}
    for k in sorted(runs):
        run = runs[k]
        q = run.config.steps // 4
        H, R = run.curve("entropy", True), run.curve("expected_reward", True)
        j = int(np.searchsorted(x_axis(run, "sample", True), ref, side="right") - 1)
        out[k] = dict(update=q, samples=int(ref), entropy_at_update=H[:, q], reward_at_update=R[:, q],
                      entropy_at_samples=H[:, j], reward_at_samples=R[:, j])
    return out


def staleness_points(runs: dict) -> dict:
    """{staleness: numbers}: :func:`entropy_points` as means over seeds (what notebook 02 §2 prints)."""
    return {k: {name: (v if isinstance(v, int) else float(np.mean(v))) for name, v in p.items()}
            for k, p in entropy_points(runs).items()}


def sample_range(runs: dict) -> float:
    """x limit for the per-sample panels: the samples seen by the least stale off-policy run
    (the on-policy run sees many more and would squash the rest)."""
    ends = sorted(float(x_axis(run, "sample")[-1]) for run in runs.values())
    return 1.05 * (ends[-2] if len(ends) > 1 else ends[-1])


def roughness(run: BanditRun, metric: str = "grad_norm") -> np.ndarray:
    """Mean |change from one update to the next| of a metric, per seed (NaNs skipped): how jagged
    its curve is (the paper's "smoother gradient norm")."""
    with np.errstate(invalid="ignore"):
        return np.nanmean(np.abs(np.diff(run.curve(metric), axis=1)), axis=1)


def per_batch_volatility(run: BanditRun) -> np.ndarray:
    """Std over sampled batches of the change in expected reward from one batch to the next, per seed.

    In reuse mode a batch serves E updates, so this is the change over E updates; in lag mode (or on-policy)
    it equals the per-update volatility.
    """
    E = run.config.updates_per_batch
    per_batch = run.curve("expected_reward", with_initial=True)[:, ::E]
    return np.diff(per_batch, axis=1).std(1)


def dominance_flags(run: BanditRun) -> tuple[np.ndarray, np.ndarray]:
    """Per (seed, update): 1 where tokens with A < 0 outnumber those with A > 0 (``count``; NaN for an update
    with no advantage at all) and 1 where they carry most of the gradient-carrying loss, ρ < 0.5 (``mass``;
    NaN without a ρ)."""
    m = run.metrics
    informative = (m["neg_adv_frac"] + m["pos_adv_frac"]) > 0
    count = np.where(informative, m["neg_adv_frac"] > m["pos_adv_frac"], np.nan)
    mass = np.where(np.isnan(m["rho"]), np.nan, m["rho"] < 0.5 - 1e-9)
    return count, mass


def dominance_per_seed(run: BanditRun) -> dict:
    """Per seed, over all updates: the share of updates in which negatives dominate by count and by loss mass
    (:func:`dominance_flags`): {"count": (seeds,), "mass": (seeds,)}."""
    count, mass = dominance_flags(run)
    with warnings.catch_warnings():                 # a seed with no informative update: NaN, quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        return {"count": np.nanmean(count, 1), "mass": np.nanmean(mass, 1)}


def rho_as_share(run: BanditRun) -> np.ndarray:
    """The run's ρ per (seed, update) as a share pos/(pos+neg), whatever its rule's ``balance`` reading."""
    rule = run.extra.get("rule_obj")
    rho = run.metrics["rho"]
    if getattr(rule, "balance", "share") == "pos_neg":               # pos/neg -> share; neg = 0 -> 1
        with np.errstate(invalid="ignore"):
            rho = np.where(np.isinf(rho), 1.0, rho / (1 + rho))
    return rho


def search_moved(run: BanditRun) -> np.ndarray:
    """Per seed, the share of updates whose bounds left BAPO's start [a⁻, a⁺]: Algorithm 1 sets c_low ← a⁻,
    c_high ← a⁺ and moves them only while ρ < ρ0, so this is how often its search moved them (the per-seed
    ``moved`` of :func:`toy_rl.verdicts.regime_of`). A rule without a search counts from its own lowest bounds,
    so fixed bounds give 0. (seeds,) array."""
    m = run.metrics
    rule = run.extra.get("rule_obj")
    if isinstance(rule, BAPO):
        lo, hi = rule.low_range[0], rule.high_range[0]
    else:
        lo, hi = float(np.nanmin(m["c_low"])), float(np.nanmin(m["c_high"]))
    return ((m["c_low"] > lo + 1e-9) | (m["c_high"] > hi + 1e-9)).mean(1)


def runs_table(runs: dict) -> dict:
    """Per run (any keys): mean reward, final entropy, mean bounds, ρ (as a share), how often the search
    moved c_low off a⁻ and how often ρ reached the target; {key: dict}."""
    out = {}
    for key, run in runs.items():
        s = per_seed_summary(run)
        m = run.metrics
        rule = run.extra.get("rule_obj")
        low0 = rule.low_range[0] if isinstance(rule, BAPO) else float(np.nanmin(m["c_low"]))
        out[key] = dict(mean_reward=float(s["mean_reward"].mean()), final_entropy=float(s["final_entropy"].mean()),
                        c_low=float(s["c_low"].mean()), c_high=float(s["c_high"].mean()),
                        rho_share=float(np.nanmean(rho_as_share(run))),
                        low_moved=float((m["c_low"] > low0 + 1e-9).mean()),
                        reached=float(np.nanmean(m["rho_reached"])) if "rho_reached" in m else math.nan)
    return out

