"""Experiments over staleness × rule × seeds: curves with 95% bands, a summary table, significance tests.

    results = sweep(BanditConfig(), stalenesses=(0, 2, 4, 8), rules=RULES, seeds=range(20))
    rows = summary_table(results)         # one row per (staleness, rule)
    print(format_table(rows))
    mean, lo, hi = confidence_band(results[4, "bapo"].curve("entropy"))

Bands are Student-t 95% intervals over seeds (scipy.stats.t): mean ± t_{0.975, n−1}·s/√n.
Rules are compared with Welch's t-test (scipy.stats.ttest_ind, equal_var=False)
against the symmetric rule at the same staleness, seed by seed values as samples.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..clipping import ClipHigher
from ..stats import confidence_band, welch_test
from .config import BanditConfig
from .rewards import make_task
from .simulate import BanditRun, check_seeds, simulate

STALENESSES = (0, 2, 4, 8)
RULES = ("symmetric", "clip-higher", "bapo")
N_SEEDS = 20
CURVE_METRICS = ("entropy", "expected_reward", "sample_reward", "entropy_change", "rho", "rho_before",
                 "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm", "ratio_std",
                 "neg_adv_frac", "approx_kl")
TESTED = ("final_entropy", "final_reward", "mean_reward")    # compared against the baseline rule


def per_seed_summary(run: BanditRun) -> dict:
    """One number per seed for every summary quantity: {name: (seeds,) array}.

    final_entropy, final_reward: after the last update. mean_reward: expected reward averaged
    over all updates (area under the curve: how fast it learned). updates_to_half / entropy_at_half:
    the first update where the expected reward passes halfway from its start to the best
    possible, and the entropy there (NaN if never): is entropy spent faster than reward is won?
    rho and the bounds, clip fractions, ratio_std, neg_adv_frac: means over updates.
    grad_norm / grad_norm_max: mean and largest logit-gradient norm. reward_volatility: std of
    the per-update change of the expected reward.
    """
    m = run.metrics
    task = make_task(run.config.preset, run.config.n_tokens, run.config.n_contexts, run.config.task_seed)
    best = float(task.reward_mean.max(-1).values.mean())
    half = (run.initial["expected_reward"] + best) / 2                          # (seeds,)
    reached = m["expected_reward"] >= half[:, None]
    first = np.where(reached.any(1), reached.argmax(1), -1)
    rows = np.arange(len(first))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = dict(
            final_entropy=m["entropy"][:, -1],
            final_reward=m["expected_reward"][:, -1],
            mean_reward=m["expected_reward"].mean(1),
            updates_to_half=np.where(first >= 0, first + 1.0, np.nan),
            entropy_at_half=np.where(first >= 0, m["entropy"][rows, np.maximum(first, 0)], np.nan),
            rho=np.nanmean(m["rho"], 1),
            rho_before=np.nanmean(m["rho_before"], 1),
            c_low=m["c_low"].mean(1),
            c_high=m["c_high"].mean(1),
            clip_frac_low=m["clip_frac_low"].mean(1),
            clip_frac_high=m["clip_frac_high"].mean(1),
            neg_adv_frac=m["neg_adv_frac"].mean(1),
            ratio_std=m["ratio_std"].mean(1),
            grad_norm=m["grad_norm"].mean(1),
            grad_norm_max=m["grad_norm"].max(1),
            reward_volatility=np.diff(np.concatenate([run.initial["expected_reward"][:, None],
                                                      m["expected_reward"]], 1), axis=1).std(1),
        )
    return out


def sweep(config: BanditConfig | None = None, stalenesses=STALENESSES, rules=RULES, seeds=range(N_SEEDS),
          progress: bool = False, on_result=None) -> dict:
    """Run every (staleness, rule) cell; returns {(staleness, rule): BanditRun}.

    ``config.staleness`` is replaced by each value of ``stalenesses``. ``rules`` are names or
    rule objects. ``on_result(key, run)`` is called as each cell finishes (e.g. to save it).
    """
    config = config or BanditConfig()
    seeds = check_seeds(seeds)
    stalenesses = list(stalenesses)
    for k in stalenesses:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"staleness must be an integer >= 0; got {k!r}")
    if not list(rules):
        raise ValueError("rules must name at least one rule")
    results = {}
    cells = [(int(k), r) for k in stalenesses for r in rules]
    for k, rule in tqdm(cells, disable=not progress, desc="bandit sweep", unit="cell"):
        run = simulate(replace(config, staleness=k), rule, seeds)
        results[k, run.rule] = run
        if on_result is not None:
            on_result((k, run.rule), run)
    return results


def summary_table(results: dict, baseline: str = "symmetric", level: float = 0.95) -> list:
    """One row per (staleness, rule): every per-seed summary as mean with _lo/_hi band, and for the
    TESTED quantities Welch's p-value (p_<name>) and t (t_<name>) against ``baseline`` at the same
    staleness (absent for the baseline itself or when it was not run)."""
    per_seed = {key: per_seed_summary(run) for key, run in results.items()}
    rows = []
    for (k, rule), summ in per_seed.items():
        run = results[k, rule]
        row = dict(staleness=k, rule=rule, mode=run.config.mode, seeds=len(run.seeds), steps=run.config.steps)
        for name, values in summ.items():
            mean, lo, hi = confidence_band(values, level)
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = float(mean), float(lo), float(hi)
        if rule != baseline and (k, baseline) in per_seed:
            for name in TESTED:
                t, p = welch_test(summ[name], per_seed[k, baseline][name])
                row[f"t_{name}"], row[f"p_{name}"] = t, p
        rows.append(row)
    return rows


def _pm(row, name, digits=3):
    mean, lo, hi = row[name], row[f"{name}_lo"], row[f"{name}_hi"]
    if not np.isfinite(mean):
        return "n/a"
    half = (hi - lo) / 2 if np.isfinite(hi) else 0.0
    return f"{mean:.{digits}f}±{half:.{digits}f}"


def _p(row, name):
    p = row.get(f"p_{name}")
    return "" if p is None else ("n/a" if not np.isfinite(p) else f"{p:.3f}")


def format_table(rows: list) -> str:
    """A fixed-width text table of the main columns (± is the half-width of the 95% band)."""
    head = ["stale", "rule", "final H", "p(H)", "final R", "mean R", "p(meanR)", "H@half", "rho",
            "c_low", "c_high", "clip lo", "clip hi", "|g|max"]
    lines = [head]
    for r in rows:
        lines.append([str(r["staleness"]), r["rule"], _pm(r, "final_entropy"), _p(r, "final_entropy"),
                      _pm(r, "final_reward"), _pm(r, "mean_reward"), _p(r, "mean_reward"),
                      _pm(r, "entropy_at_half", 2), f"{r['rho']:.2f}", f"{r['c_low']:.2f}", f"{r['c_high']:.2f}",
                      f"{r['clip_frac_low']:.3f}", f"{r['clip_frac_high']:.3f}", f"{r['grad_norm_max']:.2f}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
                     for line in lines)


def curve_records(key, run: BanditRun, metrics=CURVE_METRICS, level: float = 0.95):
    """Per update: mean and band of each metric over seeds, as dicts (one per update) ready for JSON."""
    k, rule = key
    bands = {name: confidence_band(run.metrics[name], level) for name in metrics if name in run.metrics}
    E = run.config.updates_per_batch
    for t in range(run.config.steps):
        rec = dict(staleness=k, rule=rule, update=t + 1, rollout=t // E + 1)
        for name, (mean, lo, hi) in bands.items():
            rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"] = (None if not np.isfinite(x) else float(x)
                                                                for x in (mean[t], lo[t], hi[t]))
        yield rec


class CurveWriter:
    """Append each finished cell's curves to a JSON-lines file (pass as ``sweep(on_result=...)``)."""

    def __init__(self, path, config: BanditConfig | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w") as f:
            if config is not None:
                f.write(json.dumps(dict(config=config.to_dict())) + "\n")

    def __call__(self, key, run: BanditRun):
        with self.path.open("a") as f:
            for rec in curve_records(key, run):
                f.write(json.dumps(rec) + "\n")


def bounds_ablation(config: BanditConfig | None = None, bounds=((0.8, 1.2), (0.8, 1.28), (0.8, 1.5), (0.8, 2.0),
                                                                 (0.6, 1.2), (0.7, 1.2), (0.9, 1.2)),
                    seeds=range(N_SEEDS), progress: bool = False) -> dict:
    """Fixed bounds (c_low, c_high) side by side (paper Fig. 7: raise c_high, lower c_low);
    returns {(c_low, c_high): BanditRun}. Every pair is a ClipHigher(1 − c_low, c_high − 1)."""
    config = config or BanditConfig()
    out = {}
    for c_low, c_high in tqdm(list(bounds), disable=not progress, desc="bounds", unit="pair"):
        if not (0 < c_low < 1 < c_high):
            raise ValueError(f"bounds must satisfy 0 < c_low < 1 < c_high; got ({c_low}, {c_high})")
        out[c_low, c_high] = simulate(config, ClipHigher(eps_low=1 - c_low, eps_high=c_high - 1), seeds)
    return out
