"""Notebook 06's figures of training runs (rung 3: LoRA RL on SmolLM2-135M): one run, the rules side by side at
one staleness, one rule across stalenesses. The inputs are run summaries (:func:`toy_rl.experiments.run_summaries`);
the numbers beside each figure come from :mod:`toy_rl.lm.measures`.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from ...plotting import MARKERS, RULE_NAMES, colour_of, mark_every, smooth
from ...verdicts import RHO0
from ..measures import average, curve_of, group_runs, mean_curve, volatility
from ..run import binomial_se

STALENESS_STYLES = ("-", "--", ":", "-.")
PANELS = {   # name -> (curve names, y label)
    "accuracy": (("accuracy",), "held-out accuracy (greedy)"),
    "reward": (("reward_mean",), "batch reward (sampled)"),
    "entropy": (("entropy",), "token entropy (nats)"),
    "rho": (("rho",), "ρ: positive share of the loss"),
    "bounds": (("c_low", "c_high"), "bounds c_low (--), c_high (—)"),
    "clip": (("clip_frac_low", "clip_frac_high"), "clipped: A<0,r<c_low (--), A>0,r>c_high (—)"),
    "grad_norm": (("grad_norm",), "gradient norm (before clipping to 1)"),
}

KEY_PANELS = ("accuracy", "entropy", "rho", "bounds")    # a comparison's key figure: what it learns and why


def run_figure(summary: dict, eval_size: int = 100, window: int = 5):
    """One run: held-out accuracy (±1 binomial standard error), batch reward, entropy, gradient norm.
    Returns (figure, numbers) with the baseline, final and best accuracy and the standard error."""
    fig = Figure(figsize=(14, 3.4), layout="constrained")
    axes = fig.subplots(1, 4)
    x, acc = curve_of(summary, "accuracy")
    se = np.array([binomial_se(a, eval_size) for a in acc])
    colour = colour_of(summary.get("rule") or "")
    axes[0].plot(x, acc, "o-", color=colour)
    axes[0].fill_between(x, acc - se, acc + se, color=colour, alpha=0.2, label="±1 s.e. (binomial)")
    axes[0].set_ylim(0, 1)
    axes[0].legend(fontsize=8, loc="lower right")
    for ax, name in zip(axes[1:], ("reward", "entropy", "grad_norm")):
        xs, ys = curve_of(summary, PANELS[name][0][0])
        ax.plot(xs, ys, color=colour, alpha=0.3, lw=1)
        ax.plot(xs, smooth(ys, window), color=colour, lw=2, label=f"mean of {window}")
        ax.set_ylabel(PANELS[name][1])
        ax.legend(fontsize=8)
    axes[0].set_ylabel(PANELS["accuracy"][1])
    for ax in axes:
        ax.set_xlabel("update")
    fig.suptitle(f"{summary.get('rule')}, staleness {summary.get('staleness')}: "
                 f"held-out accuracy {acc[0]:.2f} → {acc[-1]:.2f} on {eval_size} problems" if len(acc) else "",
                 fontsize=11)
    numbers = dict(baseline=float(acc[0]) if len(acc) else None, final=float(acc[-1]) if len(acc) else None,
                   best=float(acc.max()) if len(acc) else None, se_final=float(se[-1]) if len(se) else None)
    return fig, numbers


def rules_view(runs: list[dict], staleness: int, panels=("accuracy", "entropy", "rho", "bounds", "clip",
                                                         "grad_norm"), window: int = 5, rules=RULE_NAMES):
    """The rules side by side at one staleness, one panel per logged metric (means over seeds;
    per-update metrics smoothed over ``window`` updates). Returns (figure, {rule: means}) with the
    final accuracy and the means over updates of the drawn metrics, read from the run summaries."""
    groups = group_runs(runs)
    present = [r for r in rules if (staleness, r) in groups]
    if not present:
        have = sorted({k for k, _ in groups})
        raise ValueError(f"no logged run at staleness {staleness}; stalenesses logged: {have}")
    unknown = [p for p in panels if p not in PANELS]
    if unknown:
        raise ValueError(f"unknown panel(s) {unknown}; choose from {list(PANELS)}")
    cols = 2 if len(panels) == 4 else min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(5 * cols, 3.3 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    means = {}
    for i, rule in enumerate(present):
        ss = groups[staleness, rule]
        colour = colour_of(rule, i)
        for ax, panel in zip(axes, panels):
            names, _ = PANELS[panel]
            for j, name in enumerate(names):
                x, y = mean_curve(ss, name)
                if panel != "accuracy":
                    y = smooth(y, window)
                ax.plot(x, y, ("--" if j == 0 and len(names) > 1 else "-"), color=colour,
                        marker=MARKERS[i % len(MARKERS)], markevery=1 if panel == "accuracy" else mark_every(i, len(x)),
                        ms=4, label=rule if j == len(names) - 1 else None)     # a marker each: coinciding lines show
        means[rule] = dict(seeds=len(ss), final_accuracy=average(ss, "final_accuracy"))
        for key in ("entropy", "rho", "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm"):
            means[rule][key] = average(ss, key)
    for ax, panel in zip(axes, panels):
        ax.set_title(PANELS[panel][1], fontsize=9)
        ax.set_xlabel("update")
        if panel == "rho":
            ax.axhline(RHO0, color="k", ls=":", lw=1, label="BAPO target ρ0")
            ax.axhline(0.5, color="0.6", lw=0.8)
        if panel == "accuracy":
            ax.set_ylim(0, 1)
        ax.legend(fontsize=7)
    for ax in axes[len(panels):]:
        ax.axis("off")
    seeds = max(m["seeds"] for m in means.values())
    fig.suptitle(f"staleness {staleness}: the three rules ({seeds} seed{'s' if seeds > 1 else ''} each)", fontsize=11)
    return fig, means


def rules_callback(runs: list[dict], **kw):
    """What ``interact`` calls: staleness -> the means of :func:`rules_view`; displays the figure."""
    from IPython.display import display

    def callback(staleness: int) -> dict:
        fig, means = rules_view(runs, staleness, **kw)
        display(fig)
        return {r: {k: round(v, 4) for k, v in m.items()} for r, m in means.items()}
    return callback


def staleness_view(runs: list[dict], rule: str, panels=("accuracy", "entropy", "grad_norm", "reward"),
                   window: int = 5):
    """One rule at every logged staleness (claim 1): returns (figure, {staleness: numbers}) with the
    entropy of the first and last 5 updates, the largest gradient norm and the reward's volatility
    (standard deviation of its update-to-update change)."""
    groups = group_runs(runs)
    ks = sorted(k for k, r in groups if r == rule)
    if not ks:
        raise ValueError(f"no logged run of rule {rule!r}")
    fig = Figure(figsize=(4.2 * len(panels), 3.3), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(panels)))
    numbers = {}
    for i, k in enumerate(ks):
        ss = groups[k, rule]
        for ax, panel in zip(axes, panels):
            x, y = mean_curve(ss, PANELS[panel][0][0])
            ax.plot(x, y if panel == "accuracy" else smooth(y, window), STALENESS_STYLES[i % 4],
                    color=f"C{i}", marker="o" if panel == "accuracy" else None, ms=4, label=f"staleness {k}")
        numbers[k] = dict(entropy_first=average(ss, "entropy_first"), entropy_last=average(ss, "entropy_last"),
                          grad_norm_max=average(ss, "grad_norm_max"), reward_volatility=volatility(ss),
                          final_accuracy=average(ss, "final_accuracy"))
    for ax, panel in zip(axes, panels):
        ax.set_title(PANELS[panel][1], fontsize=9)
        ax.set_xlabel("update")
        ax.legend(fontsize=7)
    fig.suptitle(f"{rule} under staleness", fontsize=11)
    return fig, numbers
