"""One summary table for every rung: :func:`summarize` a sweep, :func:`format_table` the rows.

Per (scenario, rule), over seeds: the final score and the area under the score curve (held-out greedy
accuracy on rungs 2-4, the exact expected reward on rung 1), each as the mean with its Student-t 95% band
(:func:`toy_rl.stats.confidence_band`), and a paired t-test by seed against the baseline rule in the same
scenario (:func:`toy_rl.stats.paired_test`): seed k of both rules starts from the same weights and first
rollout, so the per-seed difference removes that shared noise. Then the means of the per-update diagnostics.
"""
from __future__ import annotations

import math

import numpy as np

from ..stats import confidence_band, paired_test
from .records import run_summary

# Means over updates (then over seeds) that every row carries (None where a rung does not log one).
DIAGNOSTICS = ("reward_mean", "entropy", "rho", "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm",
               "grad_norm_max", "neg_adv_frac", "staleness_mean", "entropy_first", "entropy_last", "seconds")


def _num(x):
    """A plain float, or None for a missing or NaN value (rows stay strict JSON)."""
    return None if x is None or not math.isfinite(x) else float(x)


def _band(row: dict, name: str, values) -> None:
    mean, lo, hi = confidence_band(np.array([np.nan if v is None else v for v in values], dtype=float))
    row[name], row[f"{name}_lo"], row[f"{name}_hi"] = _num(mean), _num(lo), _num(hi)


def _paired(row: dict, name: str, runs: list[dict], base: list[dict], key: str) -> None:
    """diff_<name> (mean a − b, with its band) and p_<name> of the paired t-test, pairs matched by seed."""
    mine, theirs = {s["seed"]: s[key] for s in runs}, {s["seed"]: s[key] for s in base}
    seeds = sorted(set(mine) & set(theirs), key=lambda s: (s is None, s))
    nan = lambda v: np.nan if v is None else v
    test = paired_test([nan(mine[s]) for s in seeds], [nan(theirs[s]) for s in seeds])
    row[f"diff_{name}"], row[f"diff_{name}_lo"], row[f"diff_{name}_hi"] = (
        _num(test["diff"]), _num(test["diff_lo"]), _num(test["diff_hi"]))
    row[f"p_{name}"], row["pairs"] = _num(test["p"]), test["n"]


def summarize(results: dict, baseline: str = "symmetric") -> list[dict]:
    """One row per (scenario, rule) of ``results`` ({(scenario, rule): [records of each seed]}, as
    :func:`toy_rl.experiments.sweep` and :func:`~toy_rl.experiments.load` return it), in its order.

    Each row: ``scenario``, ``rule``, ``staleness``, ``seeds``, ``score`` (the score's name), ``vs`` (the
    baseline rule); ``final_<score>`` and ``auc_<score>`` with ``_lo``/``_hi`` (the 95% band; None with one
    seed); ``start_<score>`` and ``best_<score>`` (means); against ``baseline`` in the same scenario, matched
    by seed: ``diff_vs_<baseline>`` (final score, mean difference with its band), ``p_vs_<baseline>``,
    ``diff_auc_vs_<baseline>``, ``p_auc_vs_<baseline>`` and ``pairs`` (None on the baseline's own row, or
    when fewer than 2 seeds pair up); and the means over seeds of :data:`DIAGNOSTICS`.
    """
    summaries = {key: [run_summary(recs, seed=recs[0].get("seed", i) if recs else i) for i, recs in enumerate(runs)]
                 for key, runs in results.items()}
    rows = []
    for (scenario, rule), runs in summaries.items():
        score = runs[0]["score"] if runs else "accuracy"
        row = {"scenario": scenario, "rule": rule, "staleness": runs[0]["staleness"] if runs else None,
               "seeds": len(runs), "score": score, "vs": baseline}
        for name in ("final", "auc"):
            _band(row, f"{name}_{score}", [s[f"{name}_{score}"] for s in runs])
        for name in ("start", "best"):
            row[f"{name}_{score}"] = _num(np.nanmean([np.nan if s[f"{name}_{score}"] is None else s[f"{name}_{score}"]
                                                      for s in runs])) if runs else None
        base = summaries.get((scenario, baseline))
        for name, key in ((f"vs_{baseline}", f"final_{score}"), (f"auc_vs_{baseline}", f"auc_{score}")):
            row[f"diff_{name}"] = row[f"diff_{name}_lo"] = row[f"diff_{name}_hi"] = row[f"p_{name}"] = None
            if base and rule != baseline:
                _paired(row, name, runs, base, key)
        row.setdefault("pairs", None)
        for name in DIAGNOSTICS:
            vals = [s[name] for s in runs if s.get(name) is not None]
            row[name] = _num(float(np.mean(vals))) if vals else None
        rows.append(row)
    return rows


# Outcome columns shown with their 95% band (``mean ± half-width``); the diagnostics show as plain means.
BAND_PREFIXES = ("final_", "auc_", "diff_", "mean_", "entropy_at_")


def default_columns(rows: list[dict]) -> list[str]:
    """The columns :func:`format_table` shows when none are named: those of these that the rows have."""
    first = {k: v for r in reversed(rows) for k, v in r.items()}          # every key any row has
    s, b = first.get("score", "accuracy"), first.get("vs", "symmetric")
    wanted = ("scenario", "staleness" if "scenario" not in first else None, "rule", "seeds", f"start_{s}",
              f"final_{s}", f"diff_vs_{b}", f"p_vs_{b}", f"auc_{s}", f"p_auc_vs_{b}",
              # rung 1's per-seed statistics (toy_rl.bandit.summary_table)
              "final_entropy", "p_final_entropy", "final_reward", "mean_reward", "p_mean_reward", "entropy_at_half",
              "reward_mean", "entropy", "rho", "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm",
              "grad_norm_max")
    return [c for c in wanted if c is not None and c in first]


def _is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def band_text(row: dict, key: str) -> str:
    """``row[key]`` with the half-width of its 95% band (``row[key + "_lo"]``, ``_hi``): "0.812 ± 0.031";
    ``± n/a`` with one seed, ``n/a`` for a missing mean."""
    v = row.get(key)
    if v is None or _is_nan(v):
        return "n/a"
    lo, hi = row.get(f"{key}_lo"), row.get(f"{key}_hi")
    half = "n/a" if lo is None or hi is None or _is_nan(lo) or _is_nan(hi) else f"{(hi - lo) / 2:.3f}"
    return f"{v:.3f} ± {half}"


def p_text(p) -> str:
    """A p-value as a table shows it: "< 0.001", "0.032", or "n/a" (not tested)."""
    return "n/a" if p is None or _is_nan(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def diff_text(row: dict, name: str) -> str:
    """The paired difference ``diff_<name>`` with its 95% interval: "+0.021 [+0.004, +0.038]"; "" without one."""
    if f"diff_{name}" not in row:
        return ""
    lo, hi = row.get(f"diff_{name}_lo"), row.get(f"diff_{name}_hi")
    span = "" if lo is None or _is_nan(lo) else f" [{lo:+.3f}, {hi:+.3f}]"
    return f"{row[f'diff_{name}']:+.3f}{span}"


def cell(row: dict, key: str) -> str:
    """One value as text: an outcome (:data:`BAND_PREFIXES`) with its band as ``mean ± half-width`` (``± n/a``
    with one seed), a p-value with 3 decimals, other numbers with 3 decimals; ``-`` where nothing applies
    (e.g. the test on the baseline's own row)."""
    v = row.get(key)
    if v is None:
        return "-"
    if f"{key}_lo" in row and key.startswith(BAND_PREFIXES):
        return band_text(row, key)
    if key.startswith("p_"):
        return "n/a" if _is_nan(v) else "<0.001" if v < 0.001 else f"{v:.3f}"
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def format_table(rows: list[dict], columns=None) -> str:
    """A fixed-width text table, one line per row; headers are the column names, never cut. ``columns``:
    the row keys to show (default :func:`default_columns`); ± is the half-width of the 95% band."""
    columns = list(columns or default_columns(rows))
    lines = [columns] + [[cell(r, c) for c in columns] for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    text = {c for c in columns if all(isinstance(r.get(c), str) for r in rows)}
    return "\n".join("  ".join(v.ljust(w) if c in text else v.rjust(w) for v, w, c in zip(line, widths, columns))
                     .rstrip() for line in lines)
