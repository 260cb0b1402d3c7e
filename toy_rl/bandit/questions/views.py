"""Notebook 07's figures: each builds its own ``matplotlib.figure.Figure`` (see :mod:`toy_rl.plotting`) from
what an experiment of :mod:`toy_rl.bandit.questions` returned, and returns it. They only draw."""
from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from ...plotting import band, colour_of, smooth
from .negative_branch import gradient_weights

SERIES = ("0.1", "tab:blue", "tab:purple", "tab:red", "tab:orange", "tab:brown", "tab:green")
VARIANT_COLOURS = ("tab:red", "tab:brown", "tab:green", "0.1", "tab:purple", "tab:cyan", "tab:olive", "tab:pink")


def clip_ratio_figure(out: dict, rule: str = "symmetric", first: int = 60) -> Figure:
    """Question 1: the clip fraction of each update (mean over seeds, the first ``first`` updates) and the
    expected reward, for each number of passes per rollout."""
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    keys = sorted({e for e, _ in out["runs"]})
    for i, e in enumerate(keys):
        run = out["runs"][e, rule]
        t = np.arange(1, run.config.steps + 1)
        c = run.metrics["clip_frac"].mean(0)[:first]
        ax.plot(t[:first], c, "o-", ms=3, lw=1, color=SERIES[i], label=f"epochs {e} (num_iterations={e})")
        band(bx, t, run.metrics["expected_reward"], SERIES[i], f"epochs {e}")
    ax.set(xlabel="optimizer update", ylabel="clip fraction (mean over seeds)", title=f"{rule}: what the log shows")
    bx.set(xlabel="optimizer update", ylabel="expected reward", title="it learns either way (95% bands)")
    ax.legend(fontsize=8)
    bx.legend(fontsize=8)
    return fig


def minibatch_figure(out: dict, rules=("symmetric", "clip-higher"), window: int = 10) -> Figure:
    """Question 2: the positive tokens clipped on each mini-batch of an epoch, and how far clip-higher's
    entropy drifts from the symmetric rule's, for each number of mini-batches."""
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    for i, (n, profile) in enumerate(sorted(out["profiles"].items())):
        ax.plot(np.arange(1, n + 1), profile, "o-", color=SERIES[i], label=f"{n} mini-batch{'es' if n > 1 else ''}")
        a, b = (out["runs"][n, r] for r in rules)
        diff = b.metrics["entropy"] - a.metrics["entropy"]
        band(bx, np.arange(1, a.config.steps + 1), diff, SERIES[i], f"{n} mini-batch{'es' if n > 1 else ''}", window)
    ax.set(xlabel="mini-batch of the epoch (1 = first step on fresh data)",
           ylabel=f"{rules[0]}: clip fraction high", title="A > 0 tokens above c_high, by mini-batch")
    bx.axhline(0, color="0.4", lw=0.8)
    bx.set(xlabel=f"optimizer update (mean of {window})", ylabel=f"entropy: {rules[1]} − {rules[0]} (nats)",
           title="does c_high change the run? (95% bands, paired seeds)")
    ax.legend(fontsize=8)
    bx.legend(fontsize=8)
    return fig


def clip_counts_figure(rows: dict, rule: str = "symmetric") -> Figure:
    """Question 3: the four counts of :func:`toy_rl.bandit.questions.clip_counts.clip_counts` against the drift."""
    mine = {k: r for k, r in rows.items() if k.startswith(rule + " ")}
    drifts = [k.rsplit(" ", 1)[1] for k in mine]
    keys = (("out_of_bounds", "outside [c_low, c_high], sign-blind"),
            ("min_picks_rA", "r·A < clip(r)·A (TRL before the fix)"),
            ("sign_aware", "sign-aware (low + high)"), ("zero_gradient", "gradient exactly 0 (autograd)"))
    fig = Figure(figsize=(8, 3.8), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(drifts))
    w = 0.2
    for i, (key, label) in enumerate(keys):
        ax.bar(x + (i - 1.5) * w, [r[key] for r in mine.values()], w, color=SERIES[i + 1], label=label)
    ax.set_xticks(x, [f"drift {d}" for d in drifts])
    ax.set(ylabel="share of answer tokens", title=f"{rule}: four ways to count 'clipped' on the same stale batches")
    ax.legend(fontsize=8)
    return fig


def negative_branch_figure(rows: dict, c: float = 3.0, c_low: float = 0.8, c_high: float = 1.2) -> Figure:
    """Question 4: a token's gradient weight against r for A = ±1, without and with dual-clip; and the largest
    weight of a negative and a positive token in the synthetic batches, against the drift (log scale)."""
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    r = torch.linspace(0.05, 5.0, 400, dtype=torch.float64)
    for a, ls in ((1.0, "-"), (-1.0, "--")):
        A = torch.full_like(r, a)
        ax.plot(r, gradient_weights(r, A, c_low, c_high).abs(), ls, color="tab:blue", label=f"A = {a:+g}, PPO clip")
        if a < 0:
            ax.plot(r, gradient_weights(r, A, c_low, c_high, c).abs(), ":", lw=2.5, color="tab:red",
                    label=f"A = {a:+g}, dual-clip c = {c:g}")
    ax.set(xlabel="ratio r", ylabel="|∂ surrogate / ∂ log π| (per unit |A|)",
           title=f"who keeps a gradient, bounds [{c_low}, {c_high}]")
    ax.legend(fontsize=8)
    drifts = [float(k.split()[1]) for k in rows]
    for key, label, col in (("max_w_neg", "largest A < 0 weight, PPO clip", "tab:blue"),
                            ("max_w_neg_dual", f"largest A < 0 weight, dual-clip c = {c:g}", "tab:red"),
                            ("max_w_pos", "largest A > 0 weight", "tab:green")):
        bx.plot(drifts, [r[key] for r in rows.values()], "o-", color=col, label=label)
    bx.set_yscale("log")
    bx.set(xlabel="drift (std of log r in the batch)", ylabel="largest per-token |weight|", title="stale batches")
    bx.legend(fontsize=8)
    return fig


def one_step_off_figure(out: dict, window: int = 10) -> Figure:
    """Question 5: the clip fraction a trainer logs, and the KL to π_old (what it logs) against the KL to the
    policy that sampled (what is true), per schedule (means over seeds, smoothed over ``window`` updates)."""
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    ax, bx = fig.subplots(1, 2)
    for i, (label, run) in enumerate(out["runs"].items()):
        t = np.arange(1, run.config.steps + 1)
        col = SERIES[i]
        ax.plot(t, smooth(run.metrics["clip_frac"].mean(0), window), color=col, label=label)
        bx.plot(t, smooth(run.metrics["behaviour_kl"].mean(0), window), color=col, label=f"{label}: to the sampler")
        bx.plot(t, smooth(run.metrics["approx_kl"].mean(0), window), ":", lw=2, color=col, label=f"{label}: to π_old")
    ax.set(xlabel=f"optimizer update (mean of {window})", ylabel="clip fraction", title="what the log shows")
    bx.set(xlabel=f"optimizer update (mean of {window})", ylabel="k3 KL estimate",
           title="logged (dotted) vs true (solid)")
    ax.legend(fontsize=8)
    bx.legend(fontsize=7)
    return fig


def entropy_figure(out: dict, schedule_label: str) -> Figure:
    """Question 6: entropy, expected reward and P(best found) of every variant under one schedule (95% bands)."""
    fig = Figure(figsize=(15, 3.8), layout="constrained")
    axes = fig.subplots(1, 3)
    runs = {v: run for (s, v), run in out["runs"].items() if s == schedule_label}
    others = iter(VARIANT_COLOURS)
    for name, run in runs.items():
        t = np.arange(0, run.config.steps + 1)
        col = colour_of(name) if name in ("symmetric", "clip-higher") else next(others)
        band(axes[0], t, run.curve("entropy", True), col, name)
        band(axes[1], t, run.curve("expected_reward", True), col, name)
        band(axes[2], t[1:], run.metrics["best_found"], col, name)
    for ax, label in zip(axes, ("entropy H (nats)", "expected reward", "share of contexts on a best token")):
        ax.set(xlabel="optimizer update", ylabel=label)
    axes[0].set_title(f"trap preset, {schedule_label}")
    axes[0].legend(fontsize=7)
    return fig
