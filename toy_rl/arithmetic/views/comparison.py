"""Rung 2's default comparison in one figure (:func:`toy_rl.arithmetic.comparison.compare`'s result).

Left: greedy held-out accuracy over training, mean and 95% band over seeds, for the three rules and the controls
that ask whether BAPO's adaptivity matters (its start [0.6, 1.2], its realised mean bounds held fixed, a wide
fixed [0.8, 2.0]). Middle: the bounds BAPO chose, per update (mean and band over seeds, up to the fewest updates
a seed made: partial rollout skips steps), beside the fixed rules'. Right: BAPO minus each rule on the primary
endpoint (accuracy averaged over training), the paired 95% interval by seed, filled where the Holm-adjusted p is
below 0.05.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ...experiments import curve
from ...experiments.controls import MEAN_BOUNDS
from ...experiments.pilot import records_array
from ...plotting import band, colour_of, paired_differences

CURVES = ("symmetric", "clip-higher", "bapo", "fixed[0.6,1.2]", MEAN_BOUNDS, "fixed[0.8,2.0]")


def comparison_view(result: dict, curves=CURVES, endpoint: str = "auc_accuracy", rung: str = "Rung 2"):
    """The figure and {rule: final mean accuracy} of the drawn curves. Reads rung 3's comparisons too
    (:func:`toy_rl.lm.comparison.compare`, or one read back with :func:`~toy_rl.arithmetic.comparison.from_logs`):
    ``rung`` heads the title."""
    runs, rows = result["runs"], result["rows"]
    fig = Figure(figsize=(15, 4.2), layout="constrained")
    ax_acc, ax_bounds, ax_diff = fig.subplots(1, 3, width_ratios=(1.2, 1.0, 1.0))
    drawn = {}
    for i, label in enumerate(c for c in curves if c in runs):
        steps, acc = curve(runs[label], "accuracy")
        ls = "-" if label in ("symmetric", "clip-higher", "bapo") else "--"
        drawn[label] = float(band(ax_acc, steps, acc, colour_of(label, i), label, ls=ls, limits=(0, 1))[-1])
    unit = "step" if str(result.get("scenario", "")).startswith("partial") else "update"    # partial: steps
    ax_acc.set(xlabel=unit, ylabel="greedy held-out accuracy", title="accuracy (95% band over seeds)")
    ax_acc.legend(fontsize=8)
    if "bapo" in runs:
        for key, name in (("c_low", "BAPO c_low"), ("c_high", "BAPO c_high")):
            values = records_array(runs["bapo"], key)
            values = values[:, :int(np.isfinite(values).all(0).sum())]   # the updates every seed made (partial rollout)
            band(ax_bounds, np.arange(values.shape[1]), values, colour_of("bapo"), name,
                 window=5, ls="-" if key == "c_high" else ":")
        # the fixed rules' bounds as grey lines named in the legend (labels beside them would collide: 1.2 and 1.28)
        for values, text, ls in (((0.8, 1.2), "symmetric [0.8, 1.2]", "--"), ((1.28,), "clip-higher c_high 1.28", "-.")):
            for k, value in enumerate(values):
                ax_bounds.axhline(value, color="0.45", lw=0.9, ls=ls, label=None if k else text)
        ax_bounds.set(xlabel="update", ylabel="bound (mean of 5 updates)", title="BAPO's bounds, per update")
        ax_bounds.legend(fontsize=8, loc="center right")
    paired_differences(ax_diff, rows, endpoint, "BAPO − rule, accuracy averaged over training")
    ax_diff.set(title="paired by seed, 95% interval\n(filled: p_holm < 0.05)")
    gate = result.get("gate") or {}
    steps = result.get("steps") or max(r[-1]["step"] for seed_runs in runs.values() for r in seed_runs)
    what = result.get("preset", result.get("task"))
    counts = {label: len(runs[label]) for label in drawn}          # a comparison still training: seeds per rule
    size = (f"{len(result['seeds'])} seeds × {steps} {unit}s" if len(set(counts.values())) <= 1
            else f"{steps} {unit}s, seeds so far " + ", ".join(f"{label} {n}" for label, n in counts.items()))
    fig.suptitle(f"{rung}, {what!r}: {size}; "
                 f"regime {gate.get('regime', 'not measured')}", fontsize=11)
    return fig, drawn
