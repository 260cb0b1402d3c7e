"""Rung 1's default comparison in one figure (:func:`toy_rl.bandit.comparison.compare`'s rows): one panel per
(staleness kind, staleness) cell, BAPO minus each rule on one endpoint, the paired 95% interval by seed, filled
where the Holm-adjusted p (the verdicts' family: claims 5 and 6) is below 0.05. Each panel's title names BAPO's regime there."""
from __future__ import annotations

from matplotlib.figure import Figure

from ...plotting import paired_differences
from ..comparison import cell_name

ENDPOINT_NAMES = {"mean_reward": "expected reward averaged over training", "final_reward": "final expected reward",
                  "p_best": "P(best token found)"}


def comparison_view(rows: list, endpoint: str = "mean_reward", title: str = ""):
    """The figure and {cell: [rules drawn]}."""
    if endpoint not in ENDPOINT_NAMES:
        raise ValueError(f"endpoint must be one of {sorted(ENDPOINT_NAMES)}; got {endpoint!r}")
    cells = list(dict.fromkeys(cell_name(r) for r in rows))
    fig = Figure(figsize=(4.2 * len(cells), 3.8), layout="constrained")
    axes = fig.subplots(1, len(cells), squeeze=False)[0]
    drawn = {}
    for i, (ax, cell) in enumerate(zip(axes, cells)):
        mine = [r for r in rows if cell_name(r) == cell]
        drawn[cell] = [r["rule"] for r in paired_differences(ax, mine, endpoint, "BAPO − rule")]
        ax.tick_params(labelleft=i == 0)
        bapo = next((r for r in mine if r["rule"] == "bapo"), {})
        moved = bapo.get("bapo_moved_frac")
        ax.set_title(f"{cell}: {bapo.get('regime', 'regime not measured')}"
                     + (f"\n(BAPO's bounds moved in {moved:.0%} of updates)" if moved is not None else ""), fontsize=9)
    fig.suptitle(title or f"BAPO − rule on the {ENDPOINT_NAMES[endpoint]}, paired by seed, 95% interval "
                          "(filled: p_holm < 0.05)", fontsize=11)
    return fig, drawn


def grid_view(grid: dict):
    """Rung 1's robustness grid (:func:`toy_rl.bandit.grid.run_grid`) as the step-size picture: BAPO minus
    clip-higher (claim 5, left) and minus the fixed rule at its own mean bounds (claim 6, right) on the expected
    reward averaged over training, in points, against the step size (× the preset's η); one line per staleness
    cell, the mean over task instances, each instance a dot. The grey band is the smallest effect worth
    reporting (±1 point). On the right a hollow marker is a cell where BAPO's bounds barely varied (claim 6 not
    testable there). Returns the figure and {(panel, cell): [(factor, mean difference)]}."""
    import numpy as np
    from ...experiments.controls import MEAN_BOUNDS, VARY_SD
    factors = sorted({f for f, _ in grid})
    panels = (("clip-higher", "claim 5: BAPO − clip-higher"), (MEAN_BOUNDS, "claim 6: BAPO − fixed at its mean bounds"))
    fig = Figure(figsize=(9.5, 3.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=False)
    drawn = {}
    for ax, (rule, title) in zip(axes, panels):
        cells = list(dict.fromkeys(cell_name(r) for rows in grid.values() for r in rows))
        for i, cell in enumerate(cells):
            points, hollow = [], []
            for f in factors:
                diffs, varies = [], []
                for (g, _), rows in grid.items():
                    if g != f:
                        continue
                    mine = {r["rule"]: r for r in rows if cell_name(r) == cell}
                    if rule in mine and "bapo" in mine:
                        a, b = (np.asarray(mine[x]["per_seed"]["mean_reward"]) for x in ("bapo", rule))
                        diffs.append(100 * float(np.mean(a - b)))
                        varies.append((mine["bapo"].get("c_high_sd") or 0.0) > VARY_SD)
                if diffs:
                    ax.scatter([f] * len(diffs), diffs, s=8, color=f"C{i}", alpha=0.4)
                    points.append((f, float(np.mean(diffs))))
                    hollow.append(rule == MEAN_BOUNDS and not any(varies))
            if points:
                x, y = zip(*points)
                ax.plot(x, y, color=f"C{i}", label=cell)
                ax.scatter(x, y, color=[("white" if h else f"C{i}") for h in hollow], edgecolors=f"C{i}", zorder=3)
                drawn[rule, cell] = points
        ax.axhspan(-1, 1, color="0.85", zorder=0)
        ax.axhline(0, color="0.4", lw=0.8)
        ax.set(xscale="log", xticks=factors, xticklabels=[f"× {f:g}" for f in factors], xlabel="step size η",
               ylabel="difference (points of mean reward)", title=title)
        ax.set_xticks([], minor=True)
    axes[0].legend(fontsize=8, title="cell", title_fontsize=8)
    fig.suptitle("Is BAPO's lead robust to the step size? (mean over task instances; dots: each instance; "
                 "grey: under 1 point)", fontsize=10)
    return fig, drawn
