"""Notebook 06 §6b: BAPO's search re-run on every logged LoRA batch (:mod:`toy_rl.lm.logged_search`) for the
sliders' ρ0 and ranges: ρ before and after, the bounds chosen update by update, ρ along the search path."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ...plotting import FALLBACK_COLOURS, RULE_COLOURS
from ..logged_search import search_batches, search_summary


def _colour(run: str, i: int) -> str:
    """The rule's colour when the run's label starts with a rule name, else one of the others."""
    for name, colour in sorted(RULE_COLOURS.items(), key=lambda kv: -len(kv[0])):
        if run.startswith(name):
            return colour
    return FALLBACK_COLOURS[i % len(FALLBACK_COLOURS)]


def search_view(batches, rho0: float = 0.4, low_range=(0.6, 0.9), high_range=(1.2, 3.0)):
    """Algorithm 1 with this ρ0 and these ranges on every logged batch
    (:func:`toy_rl.lm.logged_search.search_batches`).

    Left: ρ at the start bounds against ρ at the bounds chosen, one point per update (filled: the search moved);
    middle: the chosen c_high (solid) and c_low (dashed) over each run's updates, the bounds the run's own rule
    used in grey; right: ρ along the search path for every update, where it stopped marked. Returns (figure,
    :func:`toy_rl.lm.logged_search.search_summary`'s numbers plus ``low_range``, ``high_range``)."""
    table = search_batches(batches, rho0, low_range, high_range)
    summary = search_summary(table)
    rule = table["rule"]
    runs = list(dict.fromkeys(table["run"].tolist()))
    fig = Figure(figsize=(14, 4.0), layout="constrained")
    ax_r, ax_b, ax_p = fig.subplots(1, 3, gridspec_kw=dict(width_ratios=[1, 1.3, 1.3]))

    lim = [min(table["rho_before"].min(), table["rho"].min(), rho0) - 0.03,
           max(table["rho_before"].max(), table["rho"].max(), rho0) + 0.03]
    ax_r.plot(lim, lim, color="0.7", lw=0.8)
    ax_r.axhline(rho0, color="k", ls=":", lw=1, label=f"ρ0 = {rho0:g}")
    ax_r.axvline(rho0, color="k", ls=":", lw=1)
    for i, run in enumerate(runs):
        sel = table["run"] == run
        c = _colour(run, i)
        moved = sel & table["moved"]
        ax_r.scatter(table["rho_before"][sel & ~moved], table["rho"][sel & ~moved], s=14, facecolor="none",
                     edgecolor=c, label=run)
        ax_r.scatter(table["rho_before"][moved], table["rho"][moved], s=18, color=c)
    ax_r.set(xlim=lim, ylim=lim, xlabel=f"ρ at the start [{rule.low_range[0]:g}, {rule.high_range[0]:g}]",
             ylabel="ρ at the bounds chosen")
    ax_r.set_title(f"{summary['updates']} logged updates: moved in {summary['moved']:.0%}", fontsize=10)
    ax_r.legend(fontsize=7, loc="upper left")

    offset, ticks = 0, []
    for i, run in enumerate(runs):
        sel = np.flatnonzero(table["run"] == run)
        x = offset + np.arange(len(sel))
        c = _colour(run, i)
        ax_b.plot(x, table["logged_c_high"][sel], color="0.6", lw=1, label="the run's own bounds" if i == 0 else None)
        ax_b.plot(x, table["logged_c_low"][sel], color="0.6", lw=1, ls="--")
        ax_b.plot(x, table["c_high"][sel], "-o", ms=2.5, color=c)
        ax_b.plot(x, table["c_low"][sel], "--o", ms=2.5, color=c)
        ticks.append((offset + (len(sel) - 1) / 2, run))
        offset += len(sel) + 2
        if i < len(runs) - 1:
            ax_b.axvline(offset - 1.5, color="0.85", lw=0.8)
    ax_b.axhline(1.0, color="0.6", lw=0.6)
    ax_b.set_xticks([t for t, _ in ticks], [r for _, r in ticks], fontsize=7)
    ax_b.set_ylabel("bound chosen")
    ax_b.set_title(f"solid c_high, dashed c_low: range c_low [{rule.low_range[0]:g}, {rule.low_range[1]:g}], "
                   f"c_high [{rule.high_range[0]:g}, {rule.high_range[1]:g}]", fontsize=9)
    ax_b.legend(fontsize=7, loc="upper left")

    steps = np.arange(table["rho_path"].shape[1])
    for i, run in enumerate(runs):
        sel = np.flatnonzero(table["run"] == run)
        c = _colour(run, i)
        for j in sel:
            ax_p.plot(steps, table["rho_path"][j], color=c, lw=0.6, alpha=0.35)
        ax_p.scatter(table["steps"][sel], table["rho"][sel], s=10, color=c, zorder=3)
    ax_p.axhline(rho0, color="k", ls=":", lw=1)
    n_high = int(np.sum(table["path_low"] == table["path_low"][0])) - 1
    if 0 < n_high < len(steps) - 1:
        ax_p.axvline(n_high, color="0.6", lw=0.8)
        ax_p.text(n_high, ax_p.get_ylim()[1], " c_high at its max,\n then c_low rises", fontsize=7, va="top")
    ax_p.set(xlabel=f"search step (c_high first, by {rule.high_step:g}; then c_low, by {rule.low_step:g})",
             ylabel="ρ along the path")
    ax_p.set_title(f"where it stops: reached ρ0 in {summary['reached']:.0%}, ran to the end in "
                   f"{summary['at_end']:.0%}", fontsize=10)
    summary.update(low_range=tuple(float(v) for v in rule.low_range),
                   high_range=tuple(float(v) for v in rule.high_range))
    return fig, summary


def search_callback(batches):
    """What ``interact`` calls: (rho0, c_low_range, c_high_range) -> the numbers of :func:`search_view`; displays
    the figure itself (see :mod:`toy_rl.plotting` for why)."""
    from IPython.display import display

    def callback(rho0: float, c_low_range, c_high_range) -> dict:
        fig, summary = search_view(batches, round(rho0, 4), tuple(round(v, 4) for v in c_low_range),
                                   tuple(round(v, 4) for v in c_high_range))
        display(fig)
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in summary.items()}
    return callback


__all__ = ["search_callback", "search_view"]
