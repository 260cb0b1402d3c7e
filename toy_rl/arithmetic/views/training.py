"""Notebooks 04-05's figures over training: the rules side by side in one scenario, one rule across scenarios,
partial rollout's staleness, answer lengths, accuracy at equal samples, the warm start's curve and the
Entropy-Clip Rule on the transformer. 95% bands over seeds (:func:`toy_rl.plotting.band`); the numbers beside
each figure come from :mod:`toy_rl.arithmetic.measures`.
"""
from __future__ import annotations

import json
import math

import numpy as np
from matplotlib.figure import Figure

from ...experiments import curve
from ...plotting import MARKERS, RANGES, band, colour_of, label_panel, smooth, window_label
from ...rl.entropy_check import QUADRANTS
from ...stats import mean_ignoring_nan
from ...verdicts import RHO0
from ..measures import TABULAR_SIGN, accuracy_at_groups, entropy_check_rows, length_stats, pooled, seed_stats
from ..tasks import get_task
from ..warmstart import cache_path

RULE_PANELS = (("accuracy", "held-out accuracy (greedy)", 1), ("reward_mean", "sampled reward", 10),
               ("entropy", "entropy (nats / token)", 10), ("rho", "ρ: positive share of the loss", 10),
               ("bounds", "ratio bounds", 10), ("clip_frac_low", "clip fraction low (r<c_low, A<0)", 10),
               ("clip_frac_high", "clip fraction high (r>c_high, A>0)", 10), ("grad_norm", "gradient norm", 10))
# The key figure of a comparison: what it learns, what it keeps of entropy, who dominates the loss, the bounds.
KEY_PANELS = tuple(p for p in RULE_PANELS if p[0] in ("accuracy", "entropy", "rho", "bounds"))
# Which tokens each rule clips, beside what it learns: the four panels of notebook 04's staleness slider.
CLIP_PANELS = (("accuracy", "held-out accuracy (greedy)", 1), ("clip_frac_low", "clip fraction low (r<c_low, A<0)", 10),
               ("clip_frac_high", "clip fraction high (r>c_high, A>0)", 10), ("rho", "ρ: positive share of the loss", 10))
SCENARIO_PANELS = (("accuracy", "held-out accuracy (greedy)", 1), ("reward_mean", "sampled reward", 10),
                   ("entropy", "entropy (nats / token)", 10), ("grad_norm", "gradient norm", 1),
                   ("clip_frac", "clip fraction (low + high)", 10), ("approx_kl", "KL(behaviour ‖ policy), k3", 10))
PARTIAL_PANELS = (("staleness_mean", "mean token age (updates)", 10), ("staleness_max", "oldest token (updates)", 10),
                  ("mixed_versions", "answers mixing versions (share)", 10), ("groups", "groups per update", 10))


def _panel(ax, runs, metric: str, colour: str, label: str | None, window: int, marker: str | None = None) -> float:
    """Draw one metric of one (scenario, rule) with its band (cut to the values the metric can take); returns its
    mean over seeds and updates. ``marker``: this line's own, so that lines on top of each other stay visible."""
    if metric == "bounds":
        for key, ls in (("c_high", "-"), ("c_low", "--")):
            x, table = curve(runs, key)
            if x.size:
                band(ax, x, table, colour, label if ls == "-" else None, window, ls=ls, marker=marker)
        return math.nan
    x, table = curve(runs, metric)
    if not x.size:
        return math.nan
    band(ax, x, table, colour, label, window, limits=RANGES.get(metric),
         marker=marker or ("o" if metric == "accuracy" else None))
    return mean_ignoring_nan(table)


def _grid(n: int, cols: int = 4, height: float = 3.1):
    fig = Figure(figsize=(4.3 * cols, height * math.ceil(n / cols)), layout="constrained")
    axes = np.asarray(fig.subplots(math.ceil(n / cols), cols)).reshape(-1)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def rule_bands(results: dict, scenario: str, panels=RULE_PANELS, rho0: float | None = RHO0):
    """The three rules side by side in one scenario, mean and 95% Student-t band over seeds (noisy per-update
    metrics averaged over the panel's window of updates, per seed, before the band).
    Returns (figure, {rule: {metric: mean over seeds and updates}})."""
    rules = [r for (s, r) in results if s == scenario]
    if not rules:
        raise ValueError(f"no runs for scenario {scenario!r}; have {sorted({s for s, _ in results})}")
    fig, axes = _grid(len(panels))
    out = {r: {} for r in rules}
    for ax, (metric, label, window) in zip(axes, panels):
        for i, rule in enumerate(rules):
            out[rule][metric] = _panel(ax, results[scenario, rule], metric, colour_of(rule, i), rule, window,
                                       MARKERS[i % len(MARKERS)])
        label_panel(ax, metric, label, "step", window, rho0)
        if metric == "rho" and rho0 is not None:
            ax.legend(fontsize=7)
    axes[0].legend(fontsize=8)
    n = min(len(results[scenario, r]) for r in rules)
    fig.suptitle(f"{scenario}: the three rules, 95% bands over {n} seeds", fontsize=11)
    return fig, out


def scenario_bands(results: dict, rule: str, scenarios=None, panels=SCENARIO_PANELS):
    """One rule across scenarios (e.g. on-policy and every staleness), with 95% bands over seeds.
    Returns (figure, {scenario: {metric: mean over seeds and updates}})."""
    scenarios = scenarios or [s for (s, r) in results if r == rule]
    fig, axes = _grid(len(panels), cols=3)
    out = {s: {} for s in scenarios}
    for ax, (metric, label, window) in zip(axes, panels):
        for i, s in enumerate(scenarios):
            out[s][metric] = _panel(ax, results[s, rule], metric, colour_of(s, i), s, window, MARKERS[i % len(MARKERS)])
        ax.set_xlabel("step" + window_label(window))
        ax.set_ylabel(label, fontsize=9)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{rule} in every scenario, 95% bands over seeds", fontsize=11)
    return fig, out


def rules_callback(results: dict, panels=RULE_PANELS):
    """What ``interact`` calls: scenario -> {rule: means}; displays :func:`rule_bands`' figure itself."""
    from IPython.display import display

    def callback(scenario: str) -> dict:
        fig, means = rule_bands(results, scenario, panels)
        display(fig)
        return {r: {k: round(v, 4) for k, v in m.items() if math.isfinite(v)} for r, m in means.items()}
    return callback


def partial_curves(results: dict, scenarios, panels=PARTIAL_PANELS):
    """How stale partial rollout makes the data, over training, for each scenario (all rules' seeds pooled).
    Returns (figure, {scenario: {metric: mean}, plus update_share})."""
    fig, axes = _grid(len(panels))
    out = {}
    for i, s in enumerate(scenarios):
        runs = pooled(results, s)
        st = seed_stats(runs)
        out[s] = {m: mean_ignoring_nan(st[m]) for m, _, _ in panels}
        out[s]["update_share"] = mean_ignoring_nan(st["update_share"])
        for ax, (metric, label, window) in zip(axes, panels):
            _panel(ax, runs, metric, colour_of(s, i), s, window, MARKERS[i % len(MARKERS)])
            ax.set_xlabel("step" + window_label(window))
            ax.set_ylabel(label, fontsize=9)
    axes[0].legend(fontsize=8)
    return fig, out


def length_view(results: dict, scenarios, window: int = 10):
    """Claim 2's length half: mean length of correct and of failed answers over training, per scenario (all
    rules' seeds pooled; solid correct, dashed failed). Returns (figure, {scenario: :func:`length_stats`}): p is
    the paired test of each seed's mean lengths (failed vs correct answers of the same run)."""
    fig = Figure(figsize=(5.2 * len(scenarios), 3.3), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(scenarios)))
    out = {}
    for ax, s in zip(axes, scenarios):
        runs = pooled(results, s)
        for key, colour, ls, name in (("len_correct", "tab:green", "-", "correct"),
                                      ("len_wrong", "tab:red", "--", "failed")):
            x, table = curve(runs, key)
            if x.size:
                band(ax, x, table, colour, name, window, ls=ls)
        out[s] = length_stats(runs)
        ax.set_title(f"{s}: failed − correct {out[s]['len_wrong'] - out[s]['len_correct']:+.2f} tokens "
                     f"(p = {out[s]['p']:.2g})", fontsize=9)
        ax.set_xlabel("step" + window_label(window))
        ax.set_ylabel("answer length (tokens, EOS included)")
        ax.legend(fontsize=8)
    return fig, out


def accuracy_vs_groups(results: dict, scenarios, points: int = 50):
    """Held-out accuracy against the number of groups trained on so far, per scenario
    (:func:`toy_rl.arithmetic.measures.accuracy_at_groups`): bands over runs, and the evaluations themselves as
    dots. Returns (figure, {scenario: {groups, accuracy, p}})."""
    at = accuracy_at_groups(results, scenarios, points)
    fig = Figure(figsize=(6.5, 3.6), layout="constrained")
    ax = fig.subplots()
    for i, s in enumerate(scenarios):
        band(ax, at["grid"], at[s]["table"], colour_of(s, i), s)
        for x, y in at[s]["evaluations"]:
            keep = x <= at["reach"]
            ax.plot(x[keep], y[keep], ".", color=colour_of(s, i), alpha=0.35, ms=4)
    ax.set_xlabel("groups trained on so far")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.legend(fontsize=8)
    ax.set_title(f"at equal samples: up to {at['reach']:.0f} groups, 95% bands over every run", fontsize=9)
    return fig, {s: {k: at[s][k] for k in ("groups", "accuracy", "p")} for s in scenarios}


def warmstart_view(task, config=None):
    """The cached warm start's training curve (loss, sampled validation accuracy) and its summary
    (held-out accuracy greedy / sampled, steps, seconds). Returns (figure, summary)."""
    path = cache_path(task, config).with_suffix(".jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    summary = next((r["summary"] for r in rows if "summary" in r), {})
    loss = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    val = [(r["step"], r["val_acc_sampled"]) for r in rows if "val_acc_sampled" in r]
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    a, b = fig.subplots(1, 2)
    if loss:
        x, y = np.array(loss).T
        a.plot(x, y, color="0.7", lw=0.6)
        a.plot(x, smooth(y, 25), color="k", lw=1.5, label="mean of 25")
        a.set_yscale("log")
        a.legend(fontsize=8)
    a.set_xlabel("supervised step")
    a.set_ylabel("cross-entropy on answer tokens")
    if val:
        x, y = np.array(val).T
        b.plot(x, y, "o-", color="tab:green", label="validation, sampled (stop rule)")
    for key, ls in (("heldout_acc_greedy", "--"), ("heldout_acc_sampled", ":")):
        if key in summary:
            b.axhline(summary[key], color="k", ls=ls, lw=1, label=f"held-out {key.split('_')[-1]}: {summary[key]:.2f}")
    b.set_xlabel("supervised step")
    b.set_ylabel("accuracy")
    b.set_ylim(0, 1)
    b.legend(fontsize=8)
    fig.suptitle(f"warm start of {get_task(task).name}: {summary.get('steps', '?')} steps, "
                 f"{summary.get('params', '?')} parameters", fontsize=10)
    return fig, summary


def entropy_check_view(report: dict):
    """Measured ΔH against −Cov(log π, Δz) at every answer position, per rule, and the summed ΔH per quadrant
    next to the tabular prediction's sign. ``report``: :func:`toy_rl.arithmetic.entropy_check`.
    Returns (figure, :func:`toy_rl.arithmetic.measures.entropy_check_rows`)."""
    rows = entropy_check_rows(report)
    rules = list(rows)
    fig = Figure(figsize=(4.2 * (len(rules) + 1), 3.6), layout="constrained")
    axes = fig.subplots(1, len(rules) + 1)
    for ax, rule in zip(axes, rules):
        r = report[rule]
        ex, pr = np.asarray(r["exact"]), np.asarray(r["predicted"])
        ax.scatter(pr, ex, s=4, alpha=0.4, color=colour_of(rule))
        if pr.size:
            lim = float(np.abs(np.concatenate([ex, pr])).max()) or 1.0
            ax.plot([-lim, lim], [-lim, lim], color="k", lw=0.8)
        ax.set_xlabel("predicted −Cov(log π, Δz)")
        ax.set_ylabel("measured ΔH")
        ax.set_title(f"{rule}: corr {r['correlation']:.3f}, sign {r['sign_agreement']:.3f}", fontsize=9)
    ax = axes[-1]
    w = 0.8 / max(len(rules), 1)
    for i, rule in enumerate(rules):
        ax.bar(np.arange(4) + (i - (len(rules) - 1) / 2) * w, [rows[rule][q] for q in QUADRANTS], w,
               color=colour_of(rule, i), label=rule)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(4), [q.replace("/", "\n") + "\ntabular: " + ("lowers" if TABULAR_SIGN[q] < 0 else "raises")
                             for q in QUADRANTS], fontsize=7)
    ax.set_ylabel("summed measured ΔH (nats)")
    ax.set_title(f"quadrants (error slope vs η: {report.get('error_slope', math.nan):.2f})", fontsize=9)
    ax.legend(fontsize=7)
    return fig, rows
