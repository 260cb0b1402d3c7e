"""Rung 2's step-size grid: the default comparison at lr × 0.5, 1 and 2, a verdict per step size, and one verdict
across them (docs/protocol.md §7a).

    from toy_rl.arithmetic.step_grid import load_step_grid, format_step_grid, step_grid_view
    grid = load_step_grid("runs/compare")   # {factor: comparison}: runs/ or the committed logs in results/
    print(format_step_grid(grid))

Why: a wider trust region is also a bigger step, so a verdict that holds at one step size may flip at another
(rung 1 measured exactly that). The grid, declared before running: the preset's step size (lr 5e-4 for
``long-failures``) × {0.5, 1, 2}. At every step size the three rules and the fixed rule at BAPO's realised mean
bounds run on the same 10 seeds (``toy-rl arithmetic --compare long-failures --lr X --rule symmetric
clip-higher bapo``); the default step also runs the protocol's other controls. Each step size is judged on its
own (:func:`toy_rl.arithmetic.comparison.comparison_checks`: paired by seed, Holm across that comparison's
claims, a difference under 1 point counting neither way); :func:`toy_rl.verdicts.across` gives the verdict
across the grid.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..experiments.controls import MEAN_BOUNDS, MIN_EFFECT
from ..experiments.logged import announce, candidates, train_mode
from ..plotting import colour_of
from ..verdicts import across
from .comparison import PRIMARY, compare, comparison_checks, from_logs, preset_rules
from .presets import DEFAULT, Preset, as_preset, at_step, get_preset

STEP_FACTORS = (0.5, 1.0, 2.0)
STATUSES = ("not testable", "not robust", "partly supported", "supported", "contradicted", "inconclusive")
GRID_RULES = ("symmetric", "clip-higher", "bapo", MEAN_BOUNDS)     # logged at every step size
COLOURS = {rule: colour_of(rule, i) for i, rule in enumerate((*GRID_RULES, "fixed[0.8,2.0]"))}   # one per rule


def step_command(preset: str, factor: float) -> str:
    """The command that logs one step size of the grid."""
    cell = at_step(get_preset(preset), factor)
    if factor == 1:
        return f"toy-rl arithmetic --compare {preset} --seeds 10 --workers 2"
    return (f"toy-rl arithmetic --compare {preset} --lr {cell.rl_config().lr:g} --rule symmetric clip-higher bapo "
            f"--seeds 10 --workers 2")


def run_step_grid(preset: Preset | str = DEFAULT, seeds=range(10), out="runs/compare", factors=STEP_FACTORS,
                  **settings) -> dict:
    """{factor: comparison}: :func:`toy_rl.arithmetic.comparison.compare` at every step size of the grid (the
    preset's own step with all its rules, the others with the three rules and BAPO's mean bounds), each in its own
    folder ``<out>/<preset>-lr<lr>``; logged runs are read back, missing ones trained. ``settings``: compare's
    (steps, workers, device, progress)."""
    base = as_preset(preset)
    grid = {}
    for factor in factors:
        cell = at_step(base, factor)
        rules = None if factor == 1 else {k: v for k, v in preset_rules(base).items() if k in GRID_RULES}
        grid[factor] = {**compare(cell, seeds, rules=rules, out=out, **settings), "lr": cell.rl_config().lr,
                        "base": base.name}
    return grid


def load_step_grid(root="runs/compare", preset: str = DEFAULT, factors=STEP_FACTORS) -> dict:
    """{factor: comparison} read back from the logged runs under ``root`` or its committed twin in results/
    (:mod:`toy_rl.experiments.logged`; nothing is trained); a step size whose runs are missing is a
    FileNotFoundError naming the command that logs them."""
    base = get_preset(preset)                            # an unknown name is one line
    grid, read = {}, []
    for factor in factors:
        cell = at_step(base, factor)
        home = Path(root) / cell.name
        folder = next((f for f in candidates(home) if f.is_dir()), None)
        if folder is None:
            raise FileNotFoundError(f"no runs of the step size × {factor:g} in {home}: {step_command(preset, factor)}")
        grid[factor] = {**from_logs(folder), "lr": cell.rl_config().lr, "base": preset}
        read += [folder] * sum(map(len, grid[factor]["runs"].values()))
    announce(read)
    return grid


def load_or_run_step_grid(preset: str = DEFAULT, out="runs/compare", quick_seeds=range(2), quick_steps: int = 40,
                          quick_out="runs/compare-notebook", **settings) -> tuple[dict, str]:
    """The logged grid (:func:`load_step_grid`) if ``out`` or results/ holds it, else a smaller one run now
    (:func:`run_step_grid` with ``quick_seeds`` × ``quick_steps`` into ``quick_out``; resumable; not under
    TRAIN "never"). Returns (grid, a line saying which)."""
    try:
        grid = load_step_grid(out, preset)
        n = sorted({len(g["seeds"]) for g in grid.values()})
        return grid, f"the step-size grid's logged runs ({'/'.join(map(str, n))} seeds at each step size)"
    except FileNotFoundError:
        if train_mode() == "never":
            raise
    grid = run_step_grid(preset, quick_seeds, out=quick_out, steps=quick_steps, **settings)
    return grid, (f"the step-size grid run now into {quick_out} ({len(list(quick_seeds))} seeds, {quick_steps} "
                  f"updates at each step size; the full grid: {step_command(preset, 0.5)} and the like)")


def step_grid_verdicts(grid: dict) -> dict:
    """{claim: {"text", "cells": {factor: status}, "across": one verdict over the grid}}."""
    out = {}
    for factor, result in grid.items():
        for v in comparison_checks(result):
            entry = out.setdefault(v.claim, dict(text=v.text, cells={}))
            entry["cells"][factor] = v.status
    for entry in out.values():
        entry["across"] = across(list(entry["cells"].values()))
    return out


def _row(result: dict, rule: str) -> dict | None:
    return next((r for r in result["rows"] if r["rule"] == rule), None)


def format_step_grid(grid: dict) -> str:
    """One line per step size (the primary endpoint of the grid's rules, BAPO − clip-higher with its p_holm), then
    each claim's verdict per step size and across the grid."""
    lines = [f"{'step size':<20}" + "".join(f"{r:>17}" for r in GRID_RULES) + "   BAPO − clip-higher (p_holm)"]
    for factor, result in sorted(grid.items()):
        cells = [_row(result, r) for r in GRID_RULES]
        ch = _row(result, "clip-higher")
        accuracies = "".join(f"{c[PRIMARY]:>17.3f}" if c else f"{'—':>17}" for c in cells)
        gap = f"   {100 * ch['diff_' + PRIMARY]:+.2f} points ({ch['p_holm_' + PRIMARY]:.2g})" if ch else ""
        lines.append(f"{'lr %g (× %g)' % (result['lr'], factor):<20}" + accuracies + gap)
    for claim, v in step_grid_verdicts(grid).items():
        word = next(w for w in STATUSES if v["across"].startswith(w))
        lines.append(f"claim {claim} ({v['text']}): {word.upper()}{v['across'][len(word):]}")
        lines.append("  " + ", ".join(f"lr × {f:g}: {s.split(':')[0]}" for f, s in sorted(v["cells"].items())))
    lines.append(f"(primary endpoint: {PRIMARY.replace('_', ' ')}, greedy held-out accuracy averaged over training; "
                 f"each step size paired by seed, Holm across its claims, differences under {100 * MIN_EFFECT:g} "
                 "point counting neither way)")
    return "\n".join(lines)


def step_grid_view(grid: dict):
    """The step-size picture: left, the primary endpoint of each rule (mean over seeds, 95% interval) against the
    step size; right, BAPO minus clip-higher (claim 5) and minus its own mean bounds held fixed (claim 6), paired
    by seed with 95% intervals, filled where significant after Holm; grey: under 1 point, too small to count.
    Returns the figure and {rule: [(factor, mean)]}."""
    factors = sorted(grid)
    fig = Figure(figsize=(10, 3.9), layout="constrained")
    ax_acc, ax_diff = fig.subplots(1, 2)
    drawn = {}
    offsets = dict(zip(GRID_RULES, (0.96, 0.987, 1.013, 1.04)))          # side by side, not on top of each other
    for i, rule in enumerate(GRID_RULES):
        points = [(f, _row(grid[f], rule)) for f in factors if _row(grid[f], rule)]
        if not points:
            continue
        x = np.array([f * offsets[rule] for f, _ in points])
        y = np.array([100 * r[PRIMARY] for _, r in points])
        err = np.array([[100 * (r[PRIMARY] - r[PRIMARY + "_lo"]), 100 * (r[PRIMARY + "_hi"] - r[PRIMARY])]
                        for _, r in points]).T
        colour = COLOURS[rule]
        ax_acc.errorbar(x, y, yerr=err, color=colour, marker="os^D"[i], capsize=3, label=rule,
                        ls="-" if rule != MEAN_BOUNDS else "--")
        drawn[rule] = [(f, float(v)) for (f, _), v in zip(points, y)]
    ax_acc.set(ylabel="accuracy averaged over training (%)", title="each rule at each step size (95% interval)")
    ax_acc.legend(fontsize=8)
    against = (("clip-higher", "− clip-higher (claim 5)"), (MEAN_BOUNDS, "− its mean bounds fixed (claim 6)"),
               ("fixed[0.8,2.0]", "− fixed [0.8, 2.0] (claim 6; default step only)"))
    for k, (rule, name) in enumerate(against):
        colour, labelled = COLOURS[rule], False
        for f in factors:
            r = _row(grid[f], rule)
            if r is None or not np.isfinite(r.get("diff_" + PRIMARY, np.nan)):
                continue
            x = f * (0.965, 1.0, 1.035)[k]
            d, lo, hi = (100 * r[f"diff_{PRIMARY}{s}"] for s in ("", "_lo", "_hi"))
            filled = r.get(f"p_holm_{PRIMARY}", np.nan) < 0.05
            ax_diff.plot([x, x], [lo, hi], color=colour, lw=2)
            ax_diff.plot([x], [d], "o", color=colour, mfc=colour if filled else "white", ms=7,
                         label=None if labelled else f"BAPO {name}")
            labelled = True
    ax_diff.axhspan(-100 * MIN_EFFECT, 100 * MIN_EFFECT, color="0.88", zorder=0)
    ax_diff.axhline(0, color="0.4", lw=0.8)
    ax_diff.set(ylabel="difference (points)", title="BAPO − rule, paired by seed\n(filled: p_holm < 0.05; grey: under 1 point)")
    ax_diff.legend(fontsize=8)
    for ax in (ax_acc, ax_diff):
        ax.set(xscale="log", xlabel="step size (lr)")
        ax.set_xticks(factors, [f"{grid[f]['lr']:g}\n(× {f:g})" for f in factors])
        ax.set_xticks([], minor=True)
    some = grid[factors[0]]
    fig.suptitle(f"Rung 2, {some['base']}: the comparison at {len(factors)} step sizes ({len(some['seeds'])} seeds "
                 "each)", fontsize=10)
    return fig, drawn


__all__ = ["GRID_RULES", "STEP_FACTORS", "format_step_grid", "load_or_run_step_grid", "load_step_grid", "run_step_grid", "step_command", "step_grid_verdicts",
           "step_grid_view"]
