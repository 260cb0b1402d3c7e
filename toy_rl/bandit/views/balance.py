"""Notebook 03's figures (BAPO's balance): the readings of ρ on the same batches, ρ as one bound moves, and the
paper's bounds ablation (Fig. 7). They draw what :mod:`toy_rl.bandit.replay` and
:func:`toy_rl.bandit.bounds_ablation` compute.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ...plotting import smooth
from ...stats import confidence_band
from ..experiments import per_seed_summary
from ..replay import Replayed, per_update_median, rho_bound_curves


def readings_figure(batches: Replayed, readings: dict):
    """The readings of ρ on the same batches, update by update (median over the seeds' batches).

    Left: the two shares (grad, all) with the targets in use: 0.4 (paper), 0.5 (= pos/neg 1.0, the
    authors' yaml), 1/3 (= pos/neg 0.5, their example script). Right: Eq. 8 read literally,
    pos/|pos − neg|, on a log axis. Returns (figure, {reading: per-update median})."""
    per_update = per_update_median(batches, readings)
    T = len(next(iter(per_update.values())))
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax, ax8 = fig.subplots(1, 2)
    x = np.arange(1, T + 1)
    for name, colour in (("grad share", "tab:green"), ("all share", "tab:red")):
        if name in per_update:
            ax.plot(x, smooth(per_update[name], 5), color=colour, lw=1.8, label=f"{name} (median, mean of 5)")
    for y, text in ((0.4, "0.4: paper ρ0"), (0.5, "0.5 = pos/neg 1.0 (authors' yaml)"),
                    (1 / 3, "1/3 = pos/neg 0.5 (example script)")):
        ax.axhline(y, color="0.4", ls=":", lw=1)
        ax.annotate(text, (x[-1], y), ha="right", va="bottom", fontsize=7, color="0.3")
    ax.set_xlabel("optimizer update")
    ax.set_ylabel("ρ = pos/(pos+neg)")
    ax.set_title("the same batches, two ways of counting", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    if "Eq. 8 literal" in per_update:
        cap = 1e3
        eq8 = per_update["Eq. 8 literal"]
        ax8.semilogy(x, np.minimum(eq8, cap), color="tab:purple", lw=1.2, label="pos/|pos − neg| (median)")
        ax8.set_ylim(0.2, cap * 1.5)
        lit = np.asarray(readings["Eq. 8 literal"], dtype=float)
        infinite = float(np.mean(np.isinf(lit[~np.isnan(lit)]))) if np.any(~np.isnan(lit)) else 0.0
        note = (f"capped at {cap:g}: pos = neg in {infinite:.0%} of the batches\n(fresh batches of one-token answers: "
                "r = 1 and GRPO advantages sum to 0)" if infinite > 0 else
                "pos ≠ neg in every batch here (with long wrong answers,\na fresh batch has neg = λ·pos)")
        ax8.annotate(note, (0.98, 0.97), xycoords="axes fraction", ha="right", va="top", fontsize=7)
        ax8.axhline(0.4, color="0.4", ls=":", lw=1, label="0.4")
        ax8.set_xlabel("optimizer update")
        ax8.set_ylabel("Eq. 8 read literally")
        ax8.set_title("Eq. 8's signed denominator: explodes when pos ≈ neg", fontsize=10)
        ax8.legend(fontsize=8, loc="center right")
    return fig, per_update


def rho_bound_figure(batches: Replayed, lows=None, highs=None, fixed_low: float = 0.6, fixed_high: float = 1.2,
                     rho0: float = 0.4):
    """ρ against c_low (c_high fixed) and against c_high (c_low fixed), counting gradient-carrying tokens vs all
    tokens, over the batches BAPO()'s search acts on (solid) and over all batches (dotted)
    (:func:`toy_rl.bandit.replay.rho_bound_curves`). Returns (figure, {(which, count, subset): mean ρ curve,
    "batches": {subset: how many batches}})."""
    curves = rho_bound_curves(batches, lows, highs, fixed_low, fixed_high, rho0)
    fig = Figure(figsize=(12, 4), layout="constrained")
    axes = fig.subplots(1, 2)
    out = {key: v for key, v in curves.items() if isinstance(key, tuple)} | {"batches": curves["batches"]}
    for ax, which in zip(axes, ("c_low", "c_high")):
        values = curves["grid"][which]
        for count, colour in (("grad", "tab:green"), ("all", "tab:red")):
            for subset, ls in (("ρ below target", "-"), ("all batches", ":")):
                if (which, count, subset) in out:
                    ax.plot(values, out[which, count, subset], ls, color=colour, lw=2 if ls == "-" else 1.3,
                            marker="o" if ls == "-" else None, ms=3,
                            label=f"count={count!r}, {subset} ({curves['batches'][subset]} batches)")
        ax.axhline(rho0, color="0.3", ls="--", lw=1, label=f"ρ0 = {rho0}")
        ax.set_xlabel(which + (f" (c_high = {fixed_high})" if which == "c_low" else f" (c_low = {fixed_low})"))
        ax.set_ylabel("ρ = pos/(pos+neg), mean over batches")
        ax.set_title(f"raising {which}", fontsize=10)
        ax.legend(fontsize=7)
    return fig, out


def ablation_figure(ablations: dict, base=(0.8, 1.2)):
    """The paper's Fig. 7 at toy scale: mean reward and final entropy (95% bands over seeds) as c_high
    rises with c_low at ``base[0]``, and as c_low moves with c_high at ``base[1]``.

    ``ablations``: {staleness: {(c_low, c_high): BanditRun}} (from ``bounds_ablation``).
    Returns (figure, {staleness: {(c_low, c_high): {"mean_reward": ..., "final_entropy": ...}}})."""
    fig = Figure(figsize=(11, 6.4), layout="constrained")
    axes = fig.subplots(2, 2)
    colours = ["tab:blue", "tab:purple", "tab:red", "tab:orange"]
    out = {}
    for i, (k, runs) in enumerate(sorted(ablations.items())):
        per = {b: per_seed_summary(run) for b, run in runs.items()}
        out[k] = {b: dict(mean_reward=float(v["mean_reward"].mean()), final_entropy=float(v["final_entropy"].mean()))
                  for b, v in per.items()}
        for col, (fixed_at, vary) in enumerate(((0, 1), (1, 0))):     # col 0: vary c_high; col 1: vary c_low
            pairs = sorted((b for b in per if b[fixed_at] == base[fixed_at]), key=lambda b: b[vary])
            xs = [b[vary] for b in pairs]
            for row, metric in enumerate(("mean_reward", "final_entropy")):
                bands = [confidence_band(per[b][metric]) for b in pairs]
                m = np.array([b[0] for b in bands])
                err = np.array([[b[0] - b[1], b[2] - b[0]] for b in bands]).T
                axes[row, col].errorbar(xs, m, yerr=err, marker="o", capsize=3, color=colours[i % 4],
                                        label=f"staleness {k}")
    for col, name in enumerate(("c_high", "c_low")):
        other = f"c_low = {base[0]}" if name == "c_high" else f"c_high = {base[1]}"
        axes[0, col].set_title(f"{'raising' if name == 'c_high' else 'moving'} {name} ({other})", fontsize=10)
        axes[1, col].set_xlabel(name)
    axes[0, 0].set_ylabel("mean expected reward over updates")
    axes[1, 0].set_ylabel("final entropy (nats)")
    axes[0, 0].legend(fontsize=8)
    return fig, out
