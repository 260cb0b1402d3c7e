"""Reading one run's metric records: curves, its score, and a few numbers per run.

A run's records are what :func:`toy_rl.rl.loop.train` logs to ``metrics.jsonl``: one dict per update
(``step``, ``rule``, ``staleness``, the batch and loss statistics, ``accuracy`` at evaluation steps, the
``seed``) and a last one with ``final: True`` after the last update. Rung 1 writes the same vocabulary
(:func:`toy_rl.bandit.experiments.seed_records`), with the exact expected reward as its score.
"""
from __future__ import annotations

import math

import numpy as np

# The score a run is judged by: held-out greedy accuracy (rungs 2-4), else the exact expected reward (rung 1).
SCORES = ("accuracy", "expected_reward")
# Per-update metrics a run summary averages (names as the loop logs them).
UPDATE_METRICS = ("reward_mean", "entropy", "rho", "rho_before", "c_low", "c_high", "clip_frac_low",
                  "clip_frac_high", "grad_norm", "neg_adv_frac", "pos_adv_frac", "neg_mass", "pos_mass",
                  "approx_kl", "staleness_mean", "len_correct", "len_wrong", "search_steps")


def score_name(records: list[dict]) -> str:
    """"accuracy" if the run logged it, else "expected_reward" (rung 1)."""
    for name in SCORES:
        if any(r.get(name) is not None for r in records):
            return name
    return SCORES[0]


def score_curve(records: list[dict], name: str | None = None) -> list[list[float]]:
    """[[step, score], ...] at every evaluation, the final one included."""
    name = name or score_name(records)
    return [[r["step"], r[name]] for r in records if r.get(name) is not None]


def final_record(records: list[dict]) -> dict | None:
    final = [r for r in records if r.get("final")]
    return final[-1] if final else None


def area_under(points: list[list[float]]) -> float | None:
    """The score averaged over training: the area under the (step, score) curve (trapezoids) over its span;
    one point: that point."""
    if not points:
        return None
    x, y = np.asarray(points, dtype=float).T
    return float(y[0]) if len(x) == 1 or x[-1] == x[0] else float(np.trapezoid(y, x) / (x[-1] - x[0]))


def curve(runs: list[list[dict]], key: str):
    """(steps, (seeds, steps) array) of one metric over several runs; NaN where a step did not log it."""
    steps = sorted({r["step"] for recs in runs for r in recs if key in r and r[key] is not None})
    table = np.full((len(runs), len(steps)), np.nan)
    index = {s: i for i, s in enumerate(steps)}
    for i, recs in enumerate(runs):
        for r in recs:
            if r.get(key) is not None and r["step"] in index:
                table[i, index[r["step"]]] = r[key]
    return np.array(steps), table


def _mean(values):
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def run_summary(records: list[dict], **extra) -> dict:
    """One run in a few numbers and curves.

    Numbers, for the run's score (``accuracy``, or ``expected_reward`` on rung 1): ``start_<score>`` (at
    step 0; on rungs 3-4 the untouched model), ``final_<score>`` (after the last update),
    ``best_<score>``, ``auc_<score>`` (:func:`area_under`); ``seconds`` (sum of the update times, evaluations
    included); the mean over updates of each of :data:`UPDATE_METRICS`, ``grad_norm_max``, and
    ``entropy_first`` / ``entropy_last`` (mean over the first / last 5 updates). Curves (lists of [step,
    value]): ``<score>_curve`` and ``curves[name]`` for every update metric. ``extra`` is added as given.
    """
    steps = [r for r in records if not r.get("final")]
    final = final_record(records)
    updates = [r for r in steps if "c_low" in r]
    score = score_name(records)
    points = score_curve(records, score)
    first = records[0] if records else {}
    start = points[0][1] if points and points[0][0] == 0 else None
    out = {"rule": first.get("rule"), "staleness": first.get("staleness"), "seed": first.get("seed"),
           "steps": len(steps), "updates": len(updates), "finished": final is not None, "score": score,
           f"start_{score}": start,
           f"final_{score}": final.get(score) if final else None,
           f"best_{score}": max((a for _, a in points), default=None), f"auc_{score}": area_under(points),
           f"{score}_curve": points, "seconds": sum(r.get("seconds") or 0.0 for r in steps)}
    for name in UPDATE_METRICS:
        out[name] = _mean(r.get(name) for r in updates)
    out["grad_norm_max"] = max((r["grad_norm"] for r in updates if r.get("grad_norm") is not None), default=None)
    ent = [r["entropy"] for r in updates if r.get("entropy") is not None]
    out["entropy_first"], out["entropy_last"] = _mean(ent[:5]), _mean(ent[-5:])
    out["curves"] = {name: [[r["step"], r[name]] for r in updates if r.get(name) is not None]
                     for name in UPDATE_METRICS}
    out.update({k: (str(v) if hasattr(v, "__fspath__") else v) for k, v in extra.items()})
    return out


def run_summaries(results: dict) -> list[dict]:
    """:func:`run_summary` of every run of a sweep, with its ``scenario``, in order."""
    return [run_summary(recs, scenario=scenario) for (scenario, _), runs in results.items() for recs in runs]
