"""Numbers read off rung-2 runs (the records :func:`toy_rl.rl.loop.train` logs) for notebooks 04-05 and the
rung-2 verdicts: one number per seed (:func:`seed_stats`), tables of their means, the on-policy check, the
partial-rollout and answer-length summaries, accuracy at equal samples, and the Entropy-Clip Rule's quadrant
signs. Views draw these; :mod:`toy_rl.arithmetic.verdicts` tests them.
"""
from __future__ import annotations

import math

import numpy as np

from ..experiments import RULES, curve
from ..rl.entropy_check import QUADRANTS
from ..stats import mean_ignoring_nan, paired_test, welch_test
from ..verdicts import RHO0, reached_when_needed

# tabular prediction (App. B.4): high-p/high-A and low-p/low-A lower the entropy, the others raise it
TABULAR_SIGN = {"high-p/high-A": -1, "high-p/low-A": +1, "low-p/high-A": +1, "low-p/low-A": -1}


def updates_of(recs: list[dict]) -> list[dict]:
    """The records of the steps that made an update (partial rollout skips steps where no group finished)."""
    return [r for r in recs if not r.get("final") and "grad_norm" in r]


def series(recs: list[dict], key: str) -> np.ndarray:
    """A metric over the updates of one run (records without it, and the final record, left out)."""
    return np.array([r[key] for r in recs if not r.get("final") and r.get(key) is not None], dtype=float)


def aligned(recs: list[dict], key: str) -> np.ndarray:
    """A metric at every update of one run, NaN where an update did not log it (aligned with other keys)."""
    return np.array([np.nan if r.get(key) is None else r[key] for r in updates_of(recs)], dtype=float)


def _share(flags: np.ndarray) -> float:
    return float(np.mean(flags)) if flags.size else math.nan


SEED_KEYS = ("final_accuracy", "start_accuracy", "mean_accuracy", "mean_reward", "reward_volatility",
             "start_entropy", "final_entropy", "entropy_drop", "grad_norm_max", "grad_norm_mean", "grad_roughness",
             "rho", "rho_before", "rho_reached", "reached_when_needed", "searched", "rho_before_min", "c_low", "c_high",
             "clip_frac_low", "clip_frac_high", "neg_adv_frac", "neg_count", "neg_count_early", "neg_count_late",
             "neg_mass", "neg_mass_early", "neg_mass_late", "len_correct", "len_wrong", "longer_wrong",
             "staleness_mean", "staleness_max", "mixed_versions", "groups", "update_share")


def seed_stats(runs: list[list[dict]], early: float = 0.25, tail: float = 0.1) -> dict:
    """Per seed (arrays of shape (seeds,)): what the tables and verdicts compare.

    final_accuracy / start_accuracy / mean_accuracy: greedy held-out accuracy after the last update /
        before the first / averaged over every evaluation (how fast it learned);
    mean_reward: mean sampled reward per update; reward_volatility: std of its update-to-update change;
    start_entropy / final_entropy: mean entropy over the first / last ``tail`` of the updates;
        entropy_drop = start − final;
    grad_norm_max / grad_norm_mean / grad_roughness (mean |update-to-update change|);
    rho, rho_before, c_low, c_high, clip_frac_low, clip_frac_high, neg_adv_frac: means over updates;
    rho_reached: share of BAPO's updates that ended with ρ ≥ ρ0 (NaN for fixed rules); reached_when_needed: the
        same over the updates whose ρ before the search was below ρ0 only (NaN if there were none, or for a fixed
        rule; :func:`toy_rl.verdicts.reached_when_needed`); searched: share of BAPO's updates whose search moved
        the bounds at all (ρ started below ρ0); rho_before_min: the lowest ρ seen before any search;
    neg_count: share of updates with more negative- than positive-advantage tokens (updates with none left out);
        neg_mass: the same for ρ < 0.5 (negatives carry most of the loss; updates with no advantage at all, whose
        ρ is a placeholder, left out); *_early / *_late: the first ``early``
        of training / after it;
    len_correct / len_wrong: mean answer length (tokens) of correct / failed answers; longer_wrong: share
        of updates whose failed answers were longer on average;
    staleness_mean / staleness_max / mixed_versions / groups: means over updates;
    update_share: share of steps that made an update (partial rollout skips steps where no group finished);
    seed: each run's seed id (the ``seed`` the runner puts in its records; its position in ``runs`` if absent),
        what the verdicts pair runs by.
    """
    mean = mean_ignoring_nan
    out = {k: [] for k in SEED_KEYS}
    for recs in runs:
        acc = series(recs, "accuracy")
        finals = [r["accuracy"] for r in recs if r.get("final")]
        updates = updates_of(recs)
        steps = [r for r in recs if not r.get("final")]
        cut = max(1, int(round(early * len(steps))))
        first_step = steps[cut - 1]["step"] if steps else 0
        ent, reward, grad = series(updates, "entropy"), series(updates, "reward_mean"), series(updates, "grad_norm")
        n_tail = max(1, int(round(tail * ent.size))) if ent.size else 0
        neg, pos = series(updates, "neg_adv_frac"), series(updates, "pos_adv_frac")
        is_early = np.array([r["step"] <= first_step for r in updates], dtype=bool)
        informative = (neg + pos) > 0
        neg_count = np.array([r["neg_adv_frac"] > r["pos_adv_frac"] for r in updates], dtype=bool)
        rho_all = aligned(recs, "rho")
        has_rho = np.isfinite(rho_all)
        has_mass = has_rho & ((aligned(recs, "neg_adv_frac") + aligned(recs, "pos_adv_frac")) > 0)
        is_bapo = bool(updates) and "rho_reached" in updates[0]
        rho_before = series(updates, "rho_before")
        target = updates[0].get("rho_target", RHO0) if is_bapo else RHO0
        both_len = [r for r in updates if r.get("len_correct") is not None and r.get("len_wrong") is not None]
        row = dict(
            final_accuracy=finals[-1] if finals else math.nan,
            start_accuracy=acc[0] if acc.size else math.nan,
            mean_accuracy=mean(np.concatenate([acc, finals])) if acc.size or finals else math.nan,
            mean_reward=mean(reward),
            reward_volatility=float(np.std(np.diff(reward))) if reward.size > 2 else math.nan,
            start_entropy=mean(ent[:n_tail]), final_entropy=mean(ent[-n_tail:]) if n_tail else math.nan,
            grad_norm_max=float(grad.max()) if grad.size else math.nan, grad_norm_mean=mean(grad),
            grad_roughness=mean(np.abs(np.diff(grad))),
            rho=mean(rho_all[has_rho]), rho_before=mean(rho_before),
            rho_reached=mean(series(updates, "rho_reached")),
            reached_when_needed=(float(reached_when_needed(aligned(recs, "rho_before"), rho_all, target)[0])
                                 if is_bapo else math.nan),
            searched=_share(series(updates, "search_steps") > 0) if is_bapo else math.nan,
            rho_before_min=float(rho_before.min()) if rho_before.size else math.nan,
            c_low=mean(series(updates, "c_low")), c_high=mean(series(updates, "c_high")),
            clip_frac_low=mean(series(updates, "clip_frac_low")),
            clip_frac_high=mean(series(updates, "clip_frac_high")),
            neg_adv_frac=mean(neg),
            neg_count=_share(neg_count[informative]),
            neg_count_early=_share(neg_count[is_early & informative]),
            neg_count_late=_share(neg_count[~is_early & informative]),
            neg_mass=_share(rho_all[has_mass] < 0.5),
            neg_mass_early=_share(rho_all[is_early & has_mass] < 0.5),
            neg_mass_late=_share(rho_all[~is_early & has_mass] < 0.5),
            len_correct=mean(series(updates, "len_correct")), len_wrong=mean(series(updates, "len_wrong")),
            longer_wrong=_share(np.array([r["len_wrong"] > r["len_correct"] for r in both_len], dtype=bool)),
            staleness_mean=mean(series(updates, "staleness_mean")),
            staleness_max=mean(series(updates, "staleness_max")),
            mixed_versions=mean(series(updates, "mixed_versions")), groups=mean(series(updates, "groups")),
            update_share=len(updates) / len(steps) if steps else math.nan)
        row["entropy_drop"] = row["start_entropy"] - row["final_entropy"]
        for k in SEED_KEYS:
            out[k].append(row[k])
    stats = {k: np.array(v, dtype=float) for k, v in out.items()}
    stats["seed"] = np.array([recs[0].get("seed", i) if recs else i for i, recs in enumerate(runs)])
    return stats


def pooled(results: dict, scenario: str) -> list[list[dict]]:
    """Every run of one scenario, all rules' seeds together."""
    return [recs for (s, _), rs in results.items() if s == scenario for recs in rs]


def stats_table(results: dict, keys, label=lambda s, r: f"{s:<10} {r}") -> dict:
    """{label: {key: mean over seeds}} for :func:`toy_rl.plotting.format_rows`."""
    rows = {}
    for (scenario, rule), runs in results.items():
        s = seed_stats(runs)
        rows[label(scenario, rule)] = {k: mean_ignoring_nan(s[k]) for k in keys}
    return rows


def rule_tests(results: dict, scenarios, metric: str = "final_accuracy") -> dict:
    """Per scenario: each rule's mean of a per-seed metric and Welch p for BAPO vs clip-higher,
    clip-higher vs symmetric and BAPO vs symmetric (the notebooks' table; the verdicts pair seeds).
    {scenario: {...}}."""
    out = {}
    for s in scenarios:
        v = {r: seed_stats(results[s, r])[metric] for r in RULES if (s, r) in results}
        row = {r: mean_ignoring_nan(x) for r, x in v.items()}
        for a, b, name in (("bapo", "clip-higher", "p_bapo_vs_ch"), ("clip-higher", "symmetric", "p_ch_vs_sym"),
                           ("bapo", "symmetric", "p_bapo_vs_sym")):
            row[name] = welch_test(v[a], v[b])[1] if a in v and b in v else math.nan
        out[s] = row
    return out


def on_policy_check(results: dict, scenario: str = "on-policy", base: str = "symmetric") -> dict:
    """On-policy every ratio is 1 (up to float noise), nothing is clipped and the rules coincide: the largest
    |r − 1|, the largest clip fraction, and the largest difference from ``base``'s run with the same seed of
    the entropy, the sampled reward and the held-out accuracy, over every update and seed."""
    runs = {r: v for (s, r), v in results.items() if s == scenario}
    recs = [rec for v in runs.values() for seed in v for rec in seed if "ratio_max" in rec]
    out = {"ratio_dev": max((max(abs(r["ratio_max"] - 1), abs(1 - r["ratio_min"])) for r in recs), default=math.nan),
           "clip_frac_max": max((r["clip_frac"] for r in recs), default=math.nan)}
    for key in ("entropy", "reward_mean", "accuracy"):
        _, ref = curve(runs[base], key)
        gaps = [np.nanmax(np.abs(curve(v, key)[1] - ref)) if curve(v, key)[1].shape == ref.shape else math.inf
                for r, v in runs.items() if r != base]
        out[f"{key}_gap"] = float(max(gaps, default=0.0))
    return out


def length_stats(runs: list[list[dict]]) -> dict:
    """Claim 2's length half for a set of runs: mean length of correct and failed answers, the share of updates
    whose failed answers were longer, and the paired test of the per-seed mean lengths (each seed has both):
    {len_correct, len_wrong, longer_wrong, p}."""
    st = seed_stats(runs)
    return dict(len_correct=mean_ignoring_nan(st["len_correct"]), len_wrong=mean_ignoring_nan(st["len_wrong"]),
                longer_wrong=mean_ignoring_nan(st["longer_wrong"]),
                p=paired_test(st["len_wrong"], st["len_correct"])["p"])


def accuracy_at_groups(results: dict, scenarios, points: int = 50) -> dict:
    """Held-out accuracy against the number of groups trained on so far, per scenario (all rules' seeds pooled):
    the fair axis when scenarios train on different numbers of samples per update. Each run is interpolated onto a
    common grid up to the fewest groups any run reached. Returns {"grid": (points,), "reach": groups,
    scenario: {"evaluations": [(groups, accuracy) per run], "table": (runs, points), "groups", "accuracy", "p"}}
    with the accuracy at the common count and Welch's p against the first scenario (its runs pool several rules,
    so they are not paired)."""
    per = {}
    for s in scenarios:
        per[s] = []
        for recs in pooled(results, s):
            seen, xs, ys = 0, [], []
            for r in recs:
                if r.get("accuracy") is not None:
                    xs.append(seen)
                    ys.append(r["accuracy"])
                if "grad_norm" in r:
                    seen += r.get("groups", 0)
            per[s].append((np.array(xs, dtype=float), np.array(ys, dtype=float)))
    reach = min(x[-1] for runs in per.values() for x, _ in runs)
    grid = np.linspace(0, reach, points)
    out, ref = {"grid": grid, "reach": float(reach)}, None
    for s in scenarios:
        table = np.array([np.interp(grid, x, y) for x, y in per[s]])
        at = table[:, -1]
        ref = at if ref is None else ref
        out[s] = {"evaluations": per[s], "table": table, "groups": float(reach), "accuracy": float(at.mean()),
                  "p": welch_test(at, ref)[1] if s != scenarios[0] else math.nan}
    return out


def entropy_check_rows(report: dict) -> dict:
    """Per rule of :func:`toy_rl.arithmetic.entropy_check`: correlation, sign agreement and median relative error
    of measured ΔH against −Cov(log π, Δz), the summed ΔH per quadrant, and how many quadrants (with positions)
    have the tabular prediction's sign. {rule: {...}}."""
    rows = {}
    for rule in (k for k in report if k != "error_slope"):
        r = report[rule]
        dH = r["quadrant_dH"]
        with_positions = [q for q in QUADRANTS if r["quadrant_count"][q] > 0]
        rows[rule] = dict(correlation=r["correlation"], sign_agreement=r["sign_agreement"],
                          median_rel_error=r["median_rel_error"], **{q: dH[q] for q in QUADRANTS},
                          signs_as_tabular=sum(np.sign(dH[q]) == TABULAR_SIGN[q] for q in with_positions),
                          quadrants=len(with_positions))
    return rows
