"""Notebook 02's figures (the off-policy bandit): one rule at several stalenesses against updates and against
samples, entropy against reward, the rules side by side with 95% bands, and the sliders' quick comparison.
The numbers beside each figure come from :mod:`toy_rl.bandit.measures` and :mod:`toy_rl.bandit.demos`.
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure

from ...plotting import MARKERS, RANGES, band, colour_of, label_panel
from ..config import BanditConfig
from ..demos import quick_runs, quick_summary
from ..measures import sample_range, staleness_points, x_axis

STALENESS_COLOURS = ("0.1", "tab:blue", "tab:purple", "tab:red", "tab:orange", "tab:brown")
STALENESS_PANELS = (("entropy", "entropy H (nats)"), ("expected_reward", "expected reward"),
                    ("grad_norm", "|gradient| of the logits"))
# What a bandit's quantities cannot leave (plotting.RANGES and the bandit's own): bands are cut there.
LIMITS = {**RANGES, "expected_reward": (0, 1), "best_prob": (0, 1)}
RULE_PANELS = (("entropy", "entropy H (nats)", 1), ("expected_reward", "expected reward", 1),
               ("rho", "ρ (share of grad-carrying mass)", 10), ("bounds", "bounds c_low, c_high", 10),
               ("clip_frac_low", "clip fraction low (A<0, r<c_low)", 10),
               ("clip_frac_high", "clip fraction high (A>0, r>c_high)", 10), ("grad_norm", "|gradient|", 10))
# What rule_bands draws unless told otherwise: the panels notebook 02 §4 discusses (issue 25: at most 4 panels
# where the message is one comparison). ALL_RULE_METRICS draws every panel of RULE_PANELS.
RULE_METRICS = ("entropy", "expected_reward", "rho", "bounds")
ALL_RULE_METRICS = tuple(metric for metric, _, _ in RULE_PANELS)


def staleness_curves(runs: dict, axes_names=("update", "sample"), panels=STALENESS_PANELS, window: int = 5,
                     max_samples: int | None = None):
    """One rule at several staleness levels: each metric against updates and against samples seen.

    ``runs``: {staleness: BanditRun}. Grid: one row per x axis, one column per metric; 95% bands over seeds.
    Per-update statistics (those without a step-0 value, e.g. grad_norm) are averaged over ``window``
    updates rounded up to whole reuse cycles (no aliasing with the reuse period).
    Returns (figure, :func:`toy_rl.bandit.measures.staleness_points`): the mean entropy and expected reward
    after a quarter of the updates and after half the samples the run that saw the fewest samples saw in all.
    """
    ks = sorted(runs)
    fig = Figure(figsize=(5 * len(panels), 3.6 * len(axes_names)), layout="constrained")
    axes = np.asarray(fig.subplots(len(axes_names), len(panels))).reshape(len(axes_names), len(panels))
    cmap = {k: c for k, c in zip(ks, STALENESS_COLOURS)}
    for row, axis in zip(axes, axes_names):
        for ax, (metric, label) in zip(row, panels):
            for k in ks:
                run = runs[k]
                with_init = metric in run.initial
                E = run.config.updates_per_batch
                band(ax, x_axis(run, axis, with_init), run.curve(metric, with_init), cmap[k], f"staleness {k}",
                     window=1 if with_init else E * math.ceil(window / E),
                     limits=LIMITS.get(metric))
            ax.set_xlabel("optimizer updates" if axis == "update" else "samples seen (S·G per sampled batch)")
            ax.set_ylabel(label)
            if axis == "sample":
                ax.set_xlim(0, max_samples or sample_range(runs))
        row[0].legend(fontsize=8)
    return fig, staleness_points(runs)


def entropy_vs_reward(runs: dict, label_of=lambda k: f"staleness {k}"):
    """Entropy against expected reward (mean over seeds, step by step): how much entropy each run spends
    for the same progress, whatever the x axis. ``runs``: {key: BanditRun}. Returns (figure, None)."""
    fig = Figure(figsize=(6, 4.2), layout="constrained")
    ax = fig.subplots()
    for i, (k, run) in enumerate(runs.items()):
        ax.plot(run.curve("expected_reward", True).mean(0), run.curve("entropy", True).mean(0),
                color=STALENESS_COLOURS[i % len(STALENESS_COLOURS)], lw=1.8, label=label_of(k))
    ax.set_xlabel("expected reward (mean over seeds)")
    ax.set_ylabel("entropy H (nats)")
    ax.set_title("entropy spent for the same reward", fontsize=10)
    ax.legend(fontsize=8)
    return fig, None


def rule_bands(results: dict, staleness: int, metrics=RULE_METRICS, rho0: float | None = 0.4,
               panels=RULE_PANELS):
    """The rules side by side at one staleness, 95% bands over seeds; noisy metrics smoothed over
    the given window of updates (per seed, before the band). ``results``: {(staleness, rule): BanditRun}.
    ``metrics``: which of ``panels`` to draw, in this order (default :data:`RULE_METRICS`, four panels:
    entropy, expected reward, ρ and the bounds; :data:`ALL_RULE_METRICS` for all seven). Each rule keeps one
    colour and one marker in every panel; bands stop at what their quantity can take (:data:`LIMITS`).
    Returns (figure, {rule: {metric: mean over seeds and updates}}), the means for the drawn panels only."""
    metrics = tuple(metrics)
    by_name = {p[0]: p for p in panels}
    unknown = [m for m in metrics if m not in by_name]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; choose from {list(by_name)}")
    chosen = [by_name[m] for m in metrics]
    rules = [r for (k, r) in results if k == staleness]
    n = len(chosen)
    cols = min(n, 4)
    fig = Figure(figsize=(4.3 * cols, 3.3 * math.ceil(n / cols)), layout="constrained")
    axes = np.asarray(fig.subplots(math.ceil(n / cols), cols)).reshape(-1)
    out = {r: {} for r in rules}
    for ax, (metric, label, window) in zip(axes, chosen):
        for i, rule in enumerate(rules):
            run = results[staleness, rule]
            c, m = colour_of(rule, i), MARKERS[i % len(MARKERS)]
            if metric == "bounds":
                x = x_axis(run)
                band(ax, x, run.curve("c_high"), c, rule, window, marker=m)
                band(ax, x, run.curve("c_low"), c, None, window, ls="--", marker=m)
                out[rule]["c_low"] = float(np.mean(run.curve("c_low")))
                out[rule]["c_high"] = float(np.mean(run.curve("c_high")))
                continue
            with_init = metric in run.initial
            band(ax, x_axis(run, "update", with_init), run.curve(metric, with_init), c, rule, window,
                 limits=LIMITS.get(metric), marker=m)
            out[rule][metric] = float(np.nanmean(run.curve(metric)))
        label_panel(ax, metric, label, "optimizer updates", window, rho0)
    axes[0].legend(fontsize=8)
    if "rho" in metrics[1:] and rho0 is not None:
        axes[list(metrics).index("rho")].legend(fontsize=7)       # the ρ0 line's key
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(f"staleness {staleness}: 95% bands over {len(results[staleness, rules[0]].seeds)} seeds",
                 fontsize=11)
    return fig, out


def quick_compare(staleness: int, rho0: float = 0.4, config: BanditConfig | None = None, seeds=range(8),
                  steps: int = 150):
    """What notebook 02's sliders show: symmetric, clip-higher and BAPO(rho0) at one staleness, a short run
    (:func:`toy_rl.bandit.demos.quick_runs`). Returns (figure: entropy, reward, bounds and ρ with 95% bands;
    summary: :func:`toy_rl.bandit.demos.quick_summary`)."""
    runs = quick_runs(staleness, rho0, config, seeds, steps)
    fig = Figure(figsize=(16, 3.4), layout="constrained")
    axes = fig.subplots(1, 4)
    for i, (name, run) in enumerate(runs.items()):
        c, m = colour_of(name, i), MARKERS[i % len(MARKERS)]
        band(axes[0], x_axis(run, "update", True), run.curve("entropy", True), c, name, limits=LIMITS["entropy"], marker=m)
        band(axes[1], x_axis(run, "update", True), run.curve("expected_reward", True), c, name,
             limits=LIMITS["expected_reward"], marker=m)
        band(axes[2], x_axis(run), run.curve("c_high"), c, name, 10, marker=m)
        band(axes[2], x_axis(run), run.curve("c_low"), c, None, 10, ls="--", marker=m)
        band(axes[3], x_axis(run), run.curve("rho"), c, name, 10, limits=LIMITS["rho"], marker=m)
    axes[3].axhline(rho0, color="0.3", ls=":", lw=1, label=f"ρ0 = {rho0:g}")
    for ax, label in zip(axes, ("entropy H", "expected reward", "bounds (solid c_high, dashed c_low)", "ρ (share)")):
        ax.set_xlabel("optimizer updates")
        ax.set_ylabel(label)
    axes[1].legend(fontsize=8)
    axes[3].legend(fontsize=8)
    fig.suptitle(f"staleness {staleness}, BAPO ρ0 = {rho0:g}: {len(list(seeds))} seeds × {steps} updates", fontsize=10)
    return fig, quick_summary(runs)


def quick_callback(config: BanditConfig | None = None, seeds=range(8), steps: int = 150):
    """What ``interact`` calls: (staleness, rho0) -> summary; displays the figure itself."""
    from IPython.display import display

    def callback(staleness: int, rho0: float) -> dict:
        fig, summary = quick_compare(staleness, rho0, config, seeds, steps)
        display(fig)
        return summary
    return callback
