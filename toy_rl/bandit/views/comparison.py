"""Rung 1's default comparison in one figure (:func:`toy_rl.bandit.comparison.compare`'s rows): one panel per
(staleness kind, staleness) cell, BAPO minus each rule on one endpoint, the paired 95% interval by seed, filled
where the Holm-adjusted p (over the whole table) is below 0.05. Each panel's title names BAPO's regime there."""
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
