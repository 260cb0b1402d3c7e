"""Notebook 01's figures (the Entropy-Clip Rule): one update token by token, predicted against exact ΔH on
random instances, the error against η, and the four quadrants per rule. They draw what
:func:`toy_rl.bandit.explain_update`, :func:`toy_rl.bandit.verify` and :mod:`toy_rl.bandit.demos` compute.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure

from ...plotting import colour_of, fixed_bounds
from ...threads import single_thread
from ..demos import demo_instance, sign_panels
from ..entropy_rule import ZERO_TOL, explain_update
from ..quadrants import LOWERS_ENTROPY, QUADRANTS

QUADRANT_COLOURS = {"high_p_high_A": "tab:red", "high_p_low_A": "tab:cyan",
                    "low_p_high_A": "tab:olive", "low_p_low_A": "tab:purple"}
QUADRANT_LABELS = {q: q.replace("_p_", " p / ").replace("_A", " A").replace("_", " ") for q in QUADRANTS}


def explain_view(c_low: float, c_high: float, eta: float = 0.1, pg: str = "natural", instance: dict | None = None):
    """One update of one softmax under bounds [c_low, c_high], token by token (via ``explain_update``).

    Three panels: π_b and π per token; each token's ratio against the bounds (clipped tokens marked ×);
    each token's share of the first-order ΔH, coloured by quadrant. Returns (figure, summary) where the
    summary holds the bounds, η, the exact ΔH, the first-order prediction −Cov(log π, Δz), the paper's
    form for this pg, C, and which tokens were clipped.
    """
    inst = instance or demo_instance()
    with single_thread():
        e = explain_update(inst["logits"], inst["behaviour_logits"], inst["advantages"],
                           fixed_bounds(c_low, c_high), eta=eta, pg=pg)
    K = len(e["pi"])
    tokens = np.arange(K)
    adv = np.asarray(inst["advantages"], dtype=float)
    pi_b = torch.softmax(torch.as_tensor(inst["behaviour_logits"], dtype=torch.float64), -1).numpy()
    clipped = e["clipped"].astype(bool)

    fig = Figure(figsize=(15, 3.8), layout="constrained")
    ax_p, ax_r, ax_h, ax_t = fig.subplots(1, 4, gridspec_kw=dict(width_ratios=[1, 1, 1, 0.62]))
    w = 0.38
    ax_p.bar(tokens - w / 2, pi_b, w, color="0.7", label="π_b (sampled the data)")
    ax_p.bar(tokens + w / 2, e["pi"], w, color=np.where(adv > 0, "tab:green", "tab:red"),
             label="π now (green A>0, red A<0)")
    ax_p.axhline(math.exp(float((e["pi"] * np.log(e["pi"])).sum())), color="k", ls=":", lw=1,
                 label="exp(E log π): high/low p")
    ax_p.set_xticks(tokens)
    ax_p.set_xlabel("token")
    ax_p.set_ylabel("probability")
    ax_p.set_title("the policy before the update", fontsize=10)
    ax_p.legend(fontsize=7, loc="upper right")

    ax_r.axhspan(e["c_low"], e["c_high"], color="tab:green", alpha=0.12, label="[c_low, c_high]")
    for i in tokens:
        ax_r.plot([i], [e["ratio"][i]], "x" if clipped[i] else "o", ms=10 if clipped[i] else 7,
                  color="tab:green" if adv[i] > 0 else "tab:red", mew=2.5)
        ax_r.annotate(f"A={adv[i]:+.2f}", (i, e["ratio"][i]), textcoords="offset points", xytext=(0, 8),
                      ha="center", fontsize=7)
    ax_r.axhline(1.0, color="0.5", lw=0.8)
    ax_r.set_ylim(0, max(3.0, float(e["ratio"].max()) * 1.15))
    ax_r.set_xticks(tokens)
    ax_r.set_xlabel("token")
    ax_r.set_ylabel("ratio r = π/π_b")
    ax_r.set_title(f"{int(clipped.sum())} of {K} tokens clipped (×)", fontsize=10)
    ax_r.legend(fontsize=7, loc="upper left")

    colours = [QUADRANT_COLOURS[QUADRANTS[q]] for q in e["quadrant"]]
    ax_h.bar(tokens, e["dH_share"], color=colours, edgecolor=["k" if c else "none" for c in clipped])
    ax_h.axhline(0, color="0.5", lw=0.8)
    for q in QUADRANTS:
        ax_h.bar([0], [0], color=QUADRANT_COLOURS[q],
                 label=f"{QUADRANT_LABELS[q]} ({'lowers' if LOWERS_ENTROPY[q] else 'raises'} H)")
    ax_h.set_xticks(tokens)
    ax_h.set_xlabel("token (clipped ones send nothing)")
    ax_h.set_ylabel("share of first-order ΔH (nats)")
    ax_h.set_title(f"who moves the entropy ({pg} PG, η = {eta:g})", fontsize=10)
    ax_t.axis("off")
    handles, labels = ax_h.get_legend_handles_labels()
    ax_t.legend(handles, labels, fontsize=8, loc="upper left", title="quadrant (App. B.4)", title_fontsize=8)
    form = "−η·Cov(log π, A·X+C)" if pg == "natural" else "−η·Cov(log π, π(A·X+C))"
    ax_t.text(0.0, 0.0, f"c_low = {e['c_low']:.2f}, c_high = {e['c_high']:.2f}\n"
              f"exact ΔH          {e['exact']:+.3e}\n−Cov(log π, Δz)   {e['first_order']:+.3e}\n"
              f"{form}\n                  {e['paper']:+.3e}\nC (clipped π·A)   {e['C']:+.4f}",
              transform=ax_t.transAxes, fontsize=8, family="monospace", va="bottom")
    summary = dict(c_low=e["c_low"], c_high=e["c_high"], eta=eta, pg=pg, exact=e["exact"],
                   first_order=e["first_order"], paper=e["paper"], C=e["C"],
                   clipped=[int(i) for i in tokens[clipped]])
    return fig, summary


def explain_callback(instance: dict | None = None):
    """What ``interact`` calls: (c_low, c_high, eta, pg) -> summary; displays the figure itself."""
    from IPython.display import display

    def callback(c_low: float, c_high: float, eta: float, pg: str = "natural") -> dict:
        fig, summary = explain_view(c_low, c_high, eta, pg, instance)
        display(fig)
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in summary.items()}
    return callback


def entropy_rule_scatter(instances: int = 10_000, n_tokens: int = 16, seed: int = 0, eta: float = 1e-2,
                         baseline: str = "current", max_points: int = 3000):
    """Predicted against exact ΔH on ``verify``'s random instances (:func:`toy_rl.bandit.demos.sign_panels`).

    Panels: natural step vs −η·Cov(log π, A·X + C) (the printed form); vanilla step vs
    −η·Cov(log π, π·(A·X + C)); vanilla step vs the printed form (only its sign can be compared).
    Sign disagreements are red. Returns (figure, {panel: sign agreement}), the numbers of ``verify``'s report.
    """
    panels = sign_panels(instances, n_tokens, seed, eta, baseline)
    fig = Figure(figsize=(14, 4.4), layout="constrained")
    axes = fig.subplots(1, 3)
    show = np.random.default_rng(0).permutation(instances)[:max_points]
    lin = ZERO_TOL * eta
    for ax, (key, pan) in zip(axes, panels.items()):
        e, q, keep = pan["exact"][show], pan["predicted"][show], pan["counted"][show]
        ok = np.sign(e) == np.sign(q)
        ax.scatter(q[ok], e[ok], s=4, alpha=0.35, color="tab:blue", label="same sign")
        ax.scatter(q[~ok & keep], e[~ok & keep], s=9, alpha=0.8, color="tab:red", label="opposite sign")
        ax.scatter(q[~ok & ~keep], e[~ok & ~keep], s=4, alpha=0.5, color="0.6", label="~0, not counted")
        lim = float(np.nanmax(np.abs(np.concatenate([q, e]))))
        ax.plot([-lim, lim], [-lim, lim], color="0.4", lw=0.8, ls="--", label="y = x")
        ax.axhline(0, color="0.7", lw=0.6)
        ax.axvline(0, color="0.7", lw=0.6)
        ax.set_xscale("symlog", linthresh=lin)
        ax.set_yscale("symlog", linthresh=lin)
        ax.set_xlabel(f"predicted: {pan['label']}", fontsize=9)
        ax.set_ylabel(f"exact H(z+Δz) − H(z), {pan['step']}", fontsize=9)
        ax.set_title(f"{pan['step']} vs {'vanilla form' if key == 'paper_vanilla' else 'printed form'}: "
                     f"sign agrees {pan['agree']:.1%}", fontsize=10)
        ax.legend(fontsize=7, loc="upper left", markerscale=2)
    fig.suptitle(f"{instances} random instances, K={n_tokens}, η={eta:g} (showing {len(show)}; symlog axes)",
                 fontsize=10)
    return fig, {key: pan["agree"] for key, pan in panels.items()}


def error_vs_eta(report: dict, behaviour_report: dict | None = None):
    """Median |exact − predicted| against η (log–log), one line per form of ``verify``'s report.

    With ``behaviour_report`` (``verify(baseline="behaviour")``) its vanilla form is added, dashed: with
    advantages centred on the behaviour policy C ≠ −E_π[A·X] and that form's error is O(η).
    Returns (figure, {form: fitted slope}) — the slopes are the report's ``error_slope``.
    """
    etas = np.asarray(report["etas"])
    lines = {"first_order_vanilla": ("−Cov(log π, Δz), vanilla step", "tab:blue", "-"),
             "first_order_natural": ("−Cov(log π, Δz), natural step", "tab:orange", "-"),
             "paper_natural": ("printed form, natural step", "tab:red", ":"),
             "paper_vanilla": ("−η·Cov(log π, π(AX+C)), vanilla step", "tab:green", ":")}
    fig = Figure(figsize=(7, 4.6), layout="constrained")
    ax = fig.subplots()
    slopes = {}
    for key, (label, colour, ls) in lines.items():
        f = report["forms"][key]
        slopes[key] = f["error_slope"]
        ax.loglog(etas, f["median_abs_error"], ls, marker="o", color=colour, lw=2 if ls == "-" else 1.5,
                  label=f"{label}: slope {f['error_slope']:.3f}")
    if behaviour_report is not None:
        f = behaviour_report["forms"]["paper_vanilla"]
        slopes["paper_vanilla_behaviour_baseline"] = f["error_slope"]
        ax.loglog(etas, f["median_abs_error"], "--", marker="s", color="tab:purple",
                  label=f"same, A centred on π_b (stale baseline): slope {f['error_slope']:.3f}")
    ref = np.asarray(report["forms"]["first_order_vanilla"]["median_abs_error"])
    ax.loglog(etas, ref[0] * (etas / etas[0]) ** 2 * 3, color="0.6", lw=1, ls="-.", label="∝ η² (reference)")
    ax.set_xlabel("step size η")
    ax.set_ylabel("median |exact ΔH − predicted|")
    ax.set_title("error of each prediction: slope 2 means O(η²)", fontsize=10)
    ax.legend(fontsize=7)
    return fig, slopes


def quadrant_bars(quads: dict, eta: float = 1e-2):
    """The four quadrants of App. B.4 per rule: mean first-order ΔH each quadrant causes (natural and
    vanilla PG) and the share of each quadrant's tokens the rule clips.

    ``quads``: {rule: row} as in ``verify(...)["quadrants"]`` or :func:`toy_rl.bandit.demos.same_instances`.
    Returns (figure, {rule: {quadrant: {dH_natural, dH_vanilla, clip_frac, share}}})."""
    rules = list(quads)
    fig = Figure(figsize=(14, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    x = np.arange(len(QUADRANTS))
    w = 0.8 / len(rules)
    for i, rule in enumerate(rules):
        off = (i - (len(rules) - 1) / 2) * w
        for ax, key in zip(axes, ("dH_natural", "dH_vanilla", "clip_frac")):
            ax.bar(x + off, [quads[rule][q][key] for q in QUADRANTS], w, color=colour_of(rule, i),
                   label=f"{rule} [{quads[rule]['c_low']:.2f}, {quads[rule]['c_high']:.2f}]")
    names = [f"{QUADRANT_LABELS[q]}\n({'lowers' if LOWERS_ENTROPY[q] else 'raises'} H)" for q in QUADRANTS]
    titles = ("ΔH caused, natural PG (mean per instance)", "ΔH caused, vanilla PG", "share of the quadrant clipped")
    for ax, title in zip(axes, titles):
        ax.set_xticks(x)
        ax.set_xticklabels(names, fontsize=8)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel(f"first-order ΔH at η = {eta:g} (nats)")
    axes[2].set_ylabel("clipped share (π_b-weighted)")
    axes[2].legend(fontsize=8)
    table = {rule: {q: dict(quads[rule][q]) for q in QUADRANTS} for rule in rules}
    return fig, table
