"""Notebooks 04-05's views of single batches: a stored stale batch pushed through the clipping core at any
bounds (with BAPO's own search beside it), and partial rollout's answers coloured by the policy version that
wrote each token. The batches come from :mod:`toy_rl.arithmetic.demos`; the loss from
:func:`toy_rl.clipping.policy_loss`.
"""
from __future__ import annotations

import matplotlib
import matplotlib.cm
import matplotlib.colors
import matplotlib.patches
import matplotlib.ticker
import numpy as np
from matplotlib.figure import Figure

from ...clipping import BAPO, clipped_mask, policy_loss, token_ratio
from ...plotting import fixed_bounds
from ...verdicts import RHO0
from ..demos import StoredBatch, demo_summary, last_answers, partial_demo


def _ratio_ticks(axis, ratio: np.ndarray) -> None:
    """Readable ticks on a log-scaled ratio axis: 0.1, 0.2, 0.5, 0.8, 1, 1.2, 2, 3, 5, 10 within the data."""
    lo, hi = (float(ratio.min()), float(ratio.max())) if ratio.size else (0.5, 2.0)
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 1.0, 1.2, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)
             if lo / 1.5 <= t <= hi * 1.5]
    axis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def clip_view(stored: StoredBatch, c_low: float, c_high: float):
    """The stored batch through the clipping core at bounds [c_low, c_high] (and at BAPO's own search).

    Three panels: each token's ratio against its behaviour probability (clipped tokens ×); the ratio
    histograms of A > 0 and A < 0 tokens with the bounds; the positive and negative loss mass that keeps
    its gradient, with ρ. Returns (figure, summary) where the summary is ``policy_loss``'s numbers at these
    bounds (loss, ρ, masses, clip fractions) plus where BAPO lands on the same batch.
    """
    rule = fixed_bounds(float(c_low), float(c_high))
    _, st = policy_loss(stored.logp, stored.old_logp, stored.advantages, stored.mask, rule)
    _, bapo = policy_loss(stored.logp, stored.old_logp, stored.advantages, stored.mask, BAPO())
    m = stored.mask > 0
    r, a = token_ratio(stored.logp, stored.old_logp)[m], stored.advantages[:, None].expand_as(stored.mask)[m]
    clipped = clipped_mask(r, a, c_low, c_high).numpy()
    ratio, adv = r.numpy(), a.numpy()
    p_old = stored.old_logp.exp()[m].numpy()

    fig = Figure(figsize=(15, 3.8), layout="constrained")
    a, b, c = fig.subplots(1, 3)
    a.axhspan(c_low, c_high, color="tab:green", alpha=0.12, label="[c_low, c_high]")
    for sign, colour, name in ((0, "0.6", "A = 0 (no gradient)"), (1, "tab:green", "A > 0"), (-1, "tab:red", "A < 0")):
        sel = (np.sign(adv) == sign)
        a.scatter(p_old[sel & ~clipped], ratio[sel & ~clipped], s=6, alpha=0.4, color=colour, label=name)
        a.scatter(p_old[sel & clipped], ratio[sel & clipped], s=30, marker="x", color=colour)
    a.set_xscale("log")
    a.set_yscale("log")
    _ratio_ticks(a.yaxis, ratio)
    a.set_xlabel("behaviour probability of the token")
    a.set_ylabel("ratio r = π/π_b")
    a.set_title(f"{int(clipped.sum())} of {ratio.size} tokens lose their gradient (×)", fontsize=9)
    a.legend(fontsize=7, loc="upper right")

    bins = np.geomspace(max(float(ratio.min()), 1e-3) * 0.99, float(ratio.max()) * 1.01 + 1e-9, 40)
    for sign, colour, name in ((0, "0.6", "A = 0"), (1, "tab:green", "A > 0"), (-1, "tab:red", "A < 0")):
        if (np.sign(adv) == sign).any():
            b.hist(ratio[np.sign(adv) == sign], bins=bins, color=colour, alpha=0.5, label=name)
    for x, ls, name in ((c_low, "--", "c_low"), (c_high, "-", "c_high")):
        b.axvline(x, color="k", ls=ls, lw=1, label=f"{name} = {x:.2f}")
    b.axvline(bapo["c_low"], color="tab:blue", ls="--", lw=1)
    b.axvline(bapo["c_high"], color="tab:blue", ls="-", lw=1, label=f"BAPO [{bapo['c_low']:.2f}, {bapo['c_high']:.2f}]")
    b.set_xscale("log")
    _ratio_ticks(b.xaxis, ratio)
    b.set_yscale("log")
    b.set_xlabel("ratio r")
    b.set_ylabel("tokens")
    b.set_title(f"staleness {stored.staleness}: ratios of {stored.task} answers", fontsize=9)
    b.legend(fontsize=7)

    c.bar([0, 1], [st["pos_mass"], st["neg_mass"]], color=["tab:green", "tab:red"])
    c.set_xticks([0, 1], ["positive mass\n(A>0, r ≤ c_high)", "negative mass\n(A<0, r ≥ c_low)"], fontsize=8)
    c.set_title(f"ρ = {st['rho']:.3f} (ρ0 = {RHO0}), loss {st['loss']:+.4f}", fontsize=9)
    summary = {k: st[k] for k in ("c_low", "c_high", "loss", "rho", "pos_mass", "neg_mass", "clip_frac_low",
                                  "clip_frac_high")}
    summary.update(tokens_clipped=int(clipped.sum()), bapo_c_low=bapo["c_low"], bapo_c_high=bapo["c_high"],
                   bapo_rho=bapo["rho"], bapo_rho_before=bapo["rho_before"])
    return fig, summary


def clip_callback(stored: StoredBatch):
    """What ``interact`` calls: (c_low, c_high) -> summary; displays :func:`clip_view`'s figure itself."""
    from IPython.display import display

    def callback(c_low: float, c_high: float) -> dict:
        fig, summary = clip_view(stored, c_low, c_high)
        display(fig)
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in summary.items()}
    return callback


def version_map(demo: dict, answers: int = 8):
    """The last ``answers`` answers trained on in a :func:`toy_rl.arithmetic.demos.partial_demo`, character by
    character, each coloured by the policy version that wrote it (· marks the end-of-answer token).
    Returns (figure, rows) with rows as :func:`toy_rl.arithmetic.demos.last_answers` gives them."""
    rows = last_answers(demo, answers)
    width = max((len(r["text"]) for r in rows), default=1)
    fig = Figure(figsize=(min(0.19 * width + 3.5, 16), 0.42 * max(len(rows), 1) + 1.2), layout="constrained")
    ax = fig.subplots()
    vmax = max((max(r["ages"]) for r in rows if r["ages"]), default=1) or 1
    cmap = matplotlib.colormaps["viridis_r"]
    for i, r in enumerate(rows):
        y = len(rows) - 1 - i
        for j, (ch, age, v) in enumerate(zip(r["text"], r["ages"], r["versions"])):
            ax.add_patch(matplotlib.patches.Rectangle((j, y - 0.45), 1, 0.9, color=cmap(age / vmax), lw=0))
            ax.text(j + 0.5, y, ch, ha="center", va="center", fontsize=8, family="monospace",
                    color="white" if age / vmax > 0.5 else "black")
        ax.text(width + 0.5, y, f"v{r['versions'][0]}→v{r['versions'][-1]}  R={r['reward']:.0f}  (update {r['step']})"
                if r["versions"] else "", va="center", fontsize=8)
    ax.set_xlim(0, width + 12)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [r["prompt"] for r in reversed(rows)], family="monospace", fontsize=8)
    ax.set_xlabel("answer position (token)")
    norm = matplotlib.colors.Normalize(0, vmax)
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="age of the token (updates)")
    ax.set_title(f"{demo['task']}, budget {demo['budget']} tokens per step: colour = how many updates ago "
                 "the token was written", fontsize=9)
    return fig, rows


def budget_callback(task: str = "scratchpad", steps: int = 12, answers: int = 6, **kwargs):
    """What ``interact`` calls: budget -> staleness numbers; displays the version map of a fresh demo."""
    from IPython.display import display

    def callback(budget: int) -> dict:
        demo = partial_demo(task, int(budget), steps, **kwargs)
        fig, _ = version_map(demo, answers)
        display(fig)
        return demo_summary(demo)
    return callback
