"""Plots and slider callbacks behind the rung-1 notebooks (01 Entropy-Clip Rule, 02 off-policy bandit,
03 BAPO's balance). Every function is pure: it builds its own ``matplotlib.figure.Figure`` (no pyplot
state) and returns it with the numbers it drew, so a test can check them.

Why a Figure and not pyplot: ipywidgets 8.1's ``interact`` flushes inline figures only when matplotlib
names its backend "module://matplotlib_inline...", and matplotlib >= 3.9 says "inline", so a pyplot figure
drawn inside a slider callback never redraws. The ``*_callback`` factories display the Figure themselves
(see :func:`toy_rl.surrogate.slider_callback`).

Almost everything here only draws what the library computes (``explain_update``, ``predictions``,
``verify``, ``simulate``, ``confidence_band``, ``masses``, ``BAPO.search``). A few functions compute
something the library does not, for the notebooks only:

* :func:`same_instances` — every rule (or pair of fixed bounds) applied to the *same* random instances,
  with the exact one-step ΔH and the quadrant split (the one-step version of the paper's Fig. 7 claim);
* :func:`replay_batches` — the batches a :func:`~toy_rl.bandit.simulate` run trained on, rebuilt from its
  logits history and the seed streams, so that every reading of ρ can be measured on the *same* batches
  (:func:`rho_readings` adds Eq. 8 read literally, pos/|pos − neg|);
* :func:`per_batch_volatility` and :func:`roughness` — the reward change per sampled batch (claim 1
  "per sample") and the mean update-to-update change of a curve (claim 4 "smoother gradient norm").
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import torch
from matplotlib.figure import Figure

from ..clipping import BAPO, ClipHigher, Symmetric
from ..clipping.balance import balance_of, masses, neg_mass_at, pos_mass_at
from ..clipping.loss import LOG_RATIO_CLAMP
from .config import BanditConfig
from .entropy_rule import (RULE_NAMES, ZERO_TOL, clipped_gradient, explain_update, predictions, quadrant_summary,
                           random_instances)
from .experiments import confidence_band, per_seed_summary
from .policy import log_probs
from .quadrants import LOWERS_ENTROPY, QUADRANTS
from .rewards import make_task
from .simulate import BanditRun, sample_batch, simulate
from ..threads import single_thread

RULE_COLOURS = {"symmetric": "tab:blue", "clip-higher": "tab:orange", "bapo": "tab:green"}
STALENESS_COLOURS = ("0.1", "tab:blue", "tab:purple", "tab:red", "tab:orange", "tab:brown")
QUADRANT_COLOURS = {"high_p_high_A": "tab:red", "high_p_low_A": "tab:cyan",
                    "low_p_high_A": "tab:olive", "low_p_low_A": "tab:purple"}
QUADRANT_LABELS = {q: q.replace("_p_", " p / ").replace("_A", " A").replace("_", " ") for q in QUADRANTS}


def _one_thread(fn):
    """Run ``fn`` with torch on one thread: these tensors are tiny, and on a busy machine parallel ops
    wait for descheduled workers (see :mod:`toy_rl.bandit.threads`; measured 18 s instead of 0.1 s)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_thread():
            return fn(*args, **kwargs)
    return wrapper


def _colour(name: str, i: int = 0) -> str:
    return RULE_COLOURS.get(name, f"C{(i + 3) % 10}")


def fixed_bounds(c_low: float, c_high: float) -> ClipHigher:
    """A fixed rule with ratio bounds [c_low, c_high] (0 < c_low < 1 < c_high)."""
    if not (0 < c_low < 1 < c_high):
        raise ValueError(f"bounds must satisfy 0 < c_low < 1 < c_high; got ({c_low!r}, {c_high!r})")
    return ClipHigher(eps_low=1.0 - c_low, eps_high=c_high - 1.0)


def verdict_line(claim: int, text: str, holds, evidence: str) -> str:
    """One line of a notebook's closing section: 'claim n (text): REPRODUCED / NOT REPRODUCED / PARTLY — evidence'.

    ``holds``: True, False, or a string such as "partly" / "not tested here".
    """
    if isinstance(holds, (bool, np.bool_)):
        word = "REPRODUCED" if holds else "NOT REPRODUCED"
    else:
        word = str(holds).upper()
    return f"claim {claim} ({text}): {word} — {evidence}"


# === 01 · the Entropy-Clip Rule ===================================================================

def demo_instance() -> dict:
    """One readable softmax over K = 8 tokens for the notebook-01 sliders.

    The behaviour policy sampled with logits ``behaviour_logits``; the current policy has drifted
    (ratios from about 0.65 to 2.4: at [0.8, 1.2] three tokens are clipped); graded rewards; advantages A = R − E_π[R] centred on the current
    policy (the paper's setting, so C = −E_π[A·X] holds). Returns tensors (K,) by name.
    """
    zb = torch.tensor([2.0, 1.4, 1.0, 0.6, 0.2, -0.3, -0.8, -1.4], dtype=torch.float64)
    ratio = torch.tensor([0.85, 1.1, 0.9, 1.15, 0.65, 1.6, 1.0, 2.4], dtype=torch.float64)   # before renormalising
    z = zb + ratio.log()
    rewards = torch.tensor([0.1, 0.9, 0.3, 0.6, 0.0, 1.0, 0.2, 0.8], dtype=torch.float64)
    pi = torch.softmax(z, -1)
    return dict(logits=z, behaviour_logits=zb, rewards=rewards, advantages=rewards - (pi * rewards).sum())


@_one_thread
def explain_view(c_low: float, c_high: float, eta: float = 0.1, pg: str = "natural", instance: dict | None = None):
    """One update of one softmax under bounds [c_low, c_high], token by token (via ``explain_update``).

    Three panels: π_b and π per token; each token's ratio against the bounds (clipped tokens marked ×);
    each token's share of the first-order ΔH, coloured by quadrant. Returns (figure, summary) where the
    summary holds the bounds, η, the exact ΔH, the first-order prediction −Cov(log π, Δz), the paper's
    form for this pg, C, and which tokens were clipped.
    """
    inst = instance or demo_instance()
    e = explain_update(inst["logits"], inst["behaviour_logits"], inst["advantages"], fixed_bounds(c_low, c_high),
                       eta=eta, pg=pg)
    K = len(e["pi"])
    tokens = np.arange(K)
    adv = np.asarray(inst["advantages"], dtype=float)
    pi_b = torch.softmax(torch.as_tensor(inst["behaviour_logits"], dtype=torch.float64), -1).numpy()
    clipped = e["clipped"].astype(bool)

    fig = Figure(figsize=(15, 3.8), layout="constrained")
    ax_p, ax_r, ax_h, ax_t = \
        fig.subplots(1, 4, gridspec_kw=dict(width_ratios=[1, 1, 1, 0.62]))
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


def _symlog(ax, lin: float):
    ax.set_xscale("symlog", linthresh=lin)
    ax.set_yscale("symlog", linthresh=lin)


@_one_thread
def entropy_rule_scatter(instances: int = 10_000, n_tokens: int = 16, seed: int = 0, eta: float = 1e-2,
                         baseline: str = "current", max_points: int = 3000):
    """Predicted against exact ΔH on ``verify``'s random instances (same seed, same instances), at one η.

    Panels: natural step vs −η·Cov(log π, A·X + C) (the printed form); vanilla step vs
    −η·Cov(log π, π·(A·X + C)); vanilla step vs the printed form (only its sign can be compared).
    Sign disagreements are red. Returns (figure, {panel: sign agreement}) with the same counting
    rule as ``verify`` (predictions ~0 left out), so the numbers equal its report's.
    """
    inst = random_instances(instances, n_tokens, seed, baseline)
    cg = clipped_gradient(inst)
    with torch.no_grad():
        p = predictions(inst, cg, [eta])
    panels = {
        "paper_natural": ("natural step", p["exact_natural"], p["paper_natural"], "−η·Cov(log π, A·X + C)  (printed form)"),
        "paper_vanilla": ("vanilla step", p["exact_vanilla"], p["paper_vanilla"], "−η·Cov(log π, π·(A·X + C))"),
        "paper_form_on_vanilla_step": ("vanilla step", p["exact_vanilla"], p["paper_natural"],
                                       "−η·Cov(log π, A·X + C)  (printed form)"),
    }
    fig = Figure(figsize=(14, 4.4), layout="constrained")
    axes = fig.subplots(1, 3)
    rng = np.random.default_rng(0)
    show = rng.permutation(instances)[:max_points]
    out = {}
    lin = ZERO_TOL * eta
    for ax, (key, (step, exact, pred, label)) in zip(axes, panels.items()):
        e, q = exact[0].numpy(), pred[0].numpy()
        if key == "paper_form_on_vanilla_step":                        # verify's rule: both sides not ~0
            keep = (np.abs(q) >= lin) & (np.abs(e) >= lin)
            agree = float(np.mean(np.sign(e[keep]) == np.sign(q[keep])))
        else:
            keep = np.abs(q) >= lin                                     # verify's rule: prediction not ~0
            agree = float(np.mean(np.sign(e[keep]) == np.sign(q[keep])))
        out[key] = agree
        ok = np.sign(e) == np.sign(q)
        s = show
        ax.scatter(q[s][ok[s]], e[s][ok[s]], s=4, alpha=0.35, color="tab:blue", label="same sign")
        ax.scatter(q[s][~ok[s] & keep[s]], e[s][~ok[s] & keep[s]], s=9, alpha=0.8, color="tab:red",
                   label="opposite sign")
        ax.scatter(q[s][~ok[s] & ~keep[s]], e[s][~ok[s] & ~keep[s]], s=4, alpha=0.5, color="0.6",
                   label="~0, not counted")
        lim = float(np.nanmax(np.abs(np.concatenate([q[s], e[s]]))))
        ax.plot([-lim, lim], [-lim, lim], color="0.4", lw=0.8, ls="--", label="y = x")
        ax.axhline(0, color="0.7", lw=0.6)
        ax.axvline(0, color="0.7", lw=0.6)
        _symlog(ax, lin)
        ax.set_xlabel(f"predicted: {label}", fontsize=9)
        ax.set_ylabel(f"exact H(z+Δz) − H(z), {step}", fontsize=9)
        ax.set_title(f"{step} vs {'vanilla form' if key == 'paper_vanilla' else 'printed form'}: "
                     f"sign agrees {agree:.1%}", fontsize=10)
        ax.legend(fontsize=7, loc="upper left", markerscale=2)
    fig.suptitle(f"{instances} random instances, K={n_tokens}, η={eta:g} (showing {len(show)}; symlog axes)",
                 fontsize=10)
    return fig, out


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

    ``quads``: {rule: row} as in ``verify(...)["quadrants"]`` or :func:`same_instances`.
    Returns (figure, {rule: {quadrant: {dH_natural, dH_vanilla, clip_frac, share}}})."""
    rules = list(quads)
    fig = Figure(figsize=(14, 4.2), layout="constrained")
    axes = fig.subplots(1, 3)
    x = np.arange(len(QUADRANTS))
    w = 0.8 / len(rules)
    for i, rule in enumerate(rules):
        off = (i - (len(rules) - 1) / 2) * w
        for ax, key in zip(axes, ("dH_natural", "dH_vanilla", "clip_frac")):
            ax.bar(x + off, [quads[rule][q][key] for q in QUADRANTS], w, color=_colour(rule, i),
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


@_one_thread
def same_instances(rules: dict, instances: int = 10_000, n_tokens: int = 16, seed: int = 0,
                   eta: float = 1e-2) -> dict:
    """Every rule applied to the *same* random instances (``verify`` gives each instance one random rule).

    (A computation for notebook 01.) ``rules``: {name: rule object}, e.g. fixed bounds for the
    one-step version of the paper's Fig. 7 claim. Returns {name: row}, each row as in
    ``verify(...)["quadrants"]`` (c_low, c_high, and per quadrant dH_natural, dH_vanilla, share,
    clip_frac) plus the exact one-step ΔH averaged over the instances (``exact_natural``,
    ``exact_vanilla``), its first-order prediction (``first_order_natural``, ``first_order_vanilla``:
    the quadrants' dH add up to it) and the clipped share of all tokens (``clip_frac``, π_b-weighted).
    """
    inst = random_instances(instances, n_tokens, seed)
    inst = inst._replace(rule=torch.zeros_like(inst.rule))           # every instance uses rule slot 0
    pi_b = log_probs(inst.behaviour_logits).exp()
    slot = RULE_NAMES[0]
    out = {}
    for name, rule in rules.items():
        cg = clipped_gradient(inst, rules={slot: rule})
        with torch.no_grad():
            p = predictions(inst, cg, [eta])
        row = quadrant_summary(inst, cg, eta)[slot]
        row.update(exact_natural=float(p["exact_natural"].mean()), exact_vanilla=float(p["exact_vanilla"].mean()),
                   first_order_natural=float(p["first_order_natural"].mean()),
                   first_order_vanilla=float(p["first_order_vanilla"].mean()),
                   clip_frac=float((pi_b * cg.clipped).sum(-1).mean()))
        out[name] = row
    return out


# === 02 · the off-policy bandit ===================================================================

def smooth(values, window: int = 1) -> np.ndarray:
    """Trailing moving average over the last axis, ignoring NaNs (window 1: unchanged)."""
    v = np.asarray(values, dtype=float)
    if window <= 1:
        return v
    ok = np.isfinite(v)
    kernel = np.ones(window)
    conv = lambda a: np.apply_along_axis(lambda r: np.convolve(r, kernel)[: r.shape[0]], -1, a)
    num, den = conv(np.where(ok, v, 0.0)), conv(ok.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


def band(ax, x, values, colour, label=None, window: int = 1, ls="-"):
    """Draw the mean over seeds (axis 0) and its 95% Student-t band; returns the mean curve."""
    mean, lo, hi = confidence_band(smooth(values, window))
    ax.plot(x, mean, ls, color=colour, lw=1.8, label=label)
    ax.fill_between(x, lo, hi, color=colour, alpha=0.2, lw=0)
    return mean


def x_axis(run: BanditRun, axis: str = "update", with_initial: bool = False) -> np.ndarray:
    """x values for a run's per-update curves: "update" (1..T) or "sample" (samples seen, S·G per batch)."""
    c = run.config
    t = np.arange(0 if with_initial else 1, c.steps + 1)
    if axis == "update":
        return t
    if axis == "sample":
        if c.mode == "reuse":
            batches = np.where(t == 0, 0, (t - 1) // c.updates_per_batch + 1)
        else:
            batches = t
        return batches * c.n_contexts * c.group_size
    raise ValueError(f"axis must be 'update' or 'sample'; got {axis!r}")


STALENESS_PANELS = (("entropy", "entropy H (nats)"), ("expected_reward", "expected reward"),
                    ("grad_norm", "|gradient| of the logits"))


def staleness_curves(runs: dict, axes_names=("update", "sample"), panels=STALENESS_PANELS, window: int = 5,
                     max_samples: int | None = None):
    """One rule at several staleness levels: each metric against updates and against samples seen.

    ``runs``: {staleness: BanditRun}. Grid: one row per x axis, one column per metric; 95% bands over seeds.
    Per-update statistics (those without a step-0 value, e.g. grad_norm) are averaged over ``window``
    updates rounded up to whole reuse cycles (no aliasing with the reuse period).
    Returns (figure, {staleness: numbers}): the mean entropy and expected reward after a quarter of the
    updates (``entropy_at_update``, ``reward_at_update``), and after ``samples`` samples, half of what
    the run that saw the fewest samples saw in all (``entropy_at_samples``, ``reward_at_samples``).
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
                     window=1 if with_init else E * math.ceil(window / E))
            ax.set_xlabel("optimizer updates" if axis == "update" else "samples seen (S·G per sampled batch)")
            ax.set_ylabel(label)
            if axis == "sample":
                ax.set_xlim(0, max_samples or _sample_range(runs))
        row[0].legend(fontsize=8)
    return fig, staleness_points(runs)


def staleness_points(runs: dict) -> dict:
    """{staleness: numbers} for ``runs`` = {staleness: BanditRun}: the mean entropy and expected reward after a
    quarter of the updates, and after half the samples the run that saw the fewest samples saw in all."""
    ref = min(float(x_axis(run, "sample")[-1]) for run in runs.values()) / 2
    out = {}
    for k in sorted(runs):
        run = runs[k]
        q = run.config.steps // 4
        H, R = run.curve("entropy", True), run.curve("expected_reward", True)
        j = int(np.searchsorted(x_axis(run, "sample", True), ref, side="right") - 1)
        out[k] = dict(update=q, entropy_at_update=float(H[:, q].mean()), reward_at_update=float(R[:, q].mean()),
                      samples=int(ref), entropy_at_samples=float(H[:, j].mean()), reward_at_samples=float(R[:, j].mean()))
    return out


def _sample_range(runs: dict) -> float:
    """x limit for the per-sample panels: the samples seen by the least stale off-policy run
    (the on-policy run sees many more and would squash the rest)."""
    ends = sorted(float(x_axis(run, "sample")[-1]) for run in runs.values())
    return 1.05 * (ends[-2] if len(ends) > 1 else ends[-1])


def entropy_vs_reward(runs: dict, label_of=lambda k: f"staleness {k}"):
    """Entropy against expected reward (mean over seeds, step by step): how much entropy each run spends
    for the same progress, whatever the x axis. ``runs``: {key: BanditRun}. Returns (figure, None)."""
    fig = Figure(figsize=(6, 4.2), layout="constrained")
    ax = fig.subplots()
    for i, (k, run) in enumerate(runs.items()):
        ax.plot(run.curve("expected_reward", True).mean(0), run.curve("entropy", True).mean(0),
                color=STALENESS_COLOURS[i % len(STALENESS_COLOURS)], lw=1.8,
                label=label_of(k))
    ax.set_xlabel("expected reward (mean over seeds)")
    ax.set_ylabel("entropy H (nats)")
    ax.set_title("entropy spent for the same reward", fontsize=10)
    ax.legend(fontsize=8)
    return fig, None


def roughness(run: BanditRun, metric: str = "grad_norm") -> np.ndarray:
    """Mean |change from one update to the next| of a metric, per seed (NaNs skipped): how jagged
    its curve is (the paper's "smoother gradient norm")."""
    with np.errstate(invalid="ignore"):
        return np.nanmean(np.abs(np.diff(run.curve(metric), axis=1)), axis=1)


def per_batch_volatility(run: BanditRun) -> np.ndarray:
    """Std over sampled batches of the change in expected reward from one batch to the next, per seed.

    (A computation for notebook 02: claim 1 "per sample".) In reuse mode a batch serves E updates, so
    this is the change over E updates; in lag mode (or on-policy) it equals the per-update volatility.
    """
    E = run.config.updates_per_batch
    per_batch = run.curve("expected_reward", with_initial=True)[:, ::E]
    return np.diff(per_batch, axis=1).std(1)


RULE_PANELS = (("entropy", "entropy H (nats)", 1), ("expected_reward", "expected reward", 1),
               ("rho", "ρ (share of grad-carrying mass)", 10), ("bounds", "bounds c_low, c_high", 10),
               ("clip_frac_low", "clip fraction low (A<0, r<c_low)", 10),
               ("clip_frac_high", "clip fraction high (A>0, r>c_high)", 10), ("grad_norm", "|gradient|", 10))


def rule_bands(results: dict, staleness: int, panels=RULE_PANELS, rho0: float | None = 0.4):
    """The rules side by side at one staleness, 95% bands over seeds; noisy metrics smoothed over
    the given window of updates (per seed, before the band). ``results``: {(staleness, rule): BanditRun}.
    Returns (figure, {rule: {metric: mean over seeds and updates}})."""
    rules = [r for (k, r) in results if k == staleness]
    n = len(panels)
    cols = 4
    fig = Figure(figsize=(4.3 * cols, 3.3 * math.ceil(n / cols)), layout="constrained")
    axes = np.asarray(fig.subplots(math.ceil(n / cols), cols)).reshape(-1)
    out = {r: {} for r in rules}
    for ax, (metric, label, window) in zip(axes, panels):
        for i, rule in enumerate(rules):
            run = results[staleness, rule]
            c = _colour(rule, i)
            if metric == "bounds":
                x = x_axis(run)
                band(ax, x, run.curve("c_high"), c, rule, window)
                band(ax, x, run.curve("c_low"), c, None, window, ls="--")
                out[rule]["c_low"] = float(np.mean(run.curve("c_low")))
                out[rule]["c_high"] = float(np.mean(run.curve("c_high")))
                continue
            with_init = metric in run.initial
            band(ax, x_axis(run, "update", with_init), run.curve(metric, with_init), c, rule, window)
            out[rule][metric] = float(np.nanmean(run.curve(metric)))
        if metric == "rho" and rho0 is not None:
            ax.axhline(rho0, color="0.3", ls=":", lw=1, label=f"ρ0 = {rho0}")
        if metric == "bounds":
            ax.axhline(1.0, color="0.6", lw=0.6)
            ax.set_title("solid c_high, dashed c_low", fontsize=9)
        ax.set_xlabel("optimizer updates" + (f" (mean of {window})" if window > 1 else ""))
        ax.set_ylabel(label, fontsize=9)
    axes[0].legend(fontsize=8)
    axes[2].legend(fontsize=7)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(f"staleness {staleness}: 95% bands over {len(results[staleness, rules[0]].seeds)} seeds",
                 fontsize=11)
    return fig, out


def quick_compare(staleness: int, rho0: float = 0.4, config: BanditConfig | None = None, seeds=range(8),
                  steps: int = 150):
    """What notebook 02's sliders run: symmetric, clip-higher and BAPO(rho0) at one staleness, a short run.

    Returns (figure: entropy, reward, bounds and ρ with 95% bands; summary: per rule the mean reward
    over updates, the final entropy, the mean bounds and ρ).
    """
    config = replace(config or BanditConfig(), staleness=int(staleness), steps=int(steps))
    rules = {"symmetric": Symmetric(), "clip-higher": ClipHigher(), "bapo": BAPO(rho0=float(rho0))}
    runs = {name: simulate(config, rule, seeds) for name, rule in rules.items()}
    fig = Figure(figsize=(16, 3.4), layout="constrained")
    axes = fig.subplots(1, 4)
    summary = {}
    for i, (name, run) in enumerate(runs.items()):
        c = _colour(name, i)
        band(axes[0], x_axis(run, "update", True), run.curve("entropy", True), c, name)
        band(axes[1], x_axis(run, "update", True), run.curve("expected_reward", True), c, name)
        band(axes[2], x_axis(run), run.curve("c_high"), c, name, 10)
        band(axes[2], x_axis(run), run.curve("c_low"), c, None, 10, ls="--")
        band(axes[3], x_axis(run), run.curve("rho"), c, name, 10)
        s = per_seed_summary(run)
        summary[name] = dict(mean_reward=round(float(s["mean_reward"].mean()), 4),
                             final_entropy=round(float(s["final_entropy"].mean()), 4),
                             c_low=round(float(s["c_low"].mean()), 3), c_high=round(float(s["c_high"].mean()), 3),
                             rho=round(float(np.nanmean(s["rho"])), 3))
    axes[3].axhline(rho0, color="0.3", ls=":", lw=1, label=f"ρ0 = {rho0:g}")
    for ax, label in zip(axes, ("entropy H", "expected reward", "bounds (solid c_high, dashed c_low)", "ρ (share)")):
        ax.set_xlabel("optimizer updates")
        ax.set_ylabel(label)
    axes[1].legend(fontsize=8)
    axes[3].legend(fontsize=8)
    fig.suptitle(f"staleness {staleness}, BAPO ρ0 = {rho0:g}: {len(list(seeds))} seeds × {steps} updates", fontsize=10)
    return fig, summary


def quick_callback(config: BanditConfig | None = None, seeds=range(8), steps: int = 150):
    """What ``interact`` calls: (staleness, rho0) -> summary; displays the figure itself."""
    from IPython.display import display

    def callback(staleness: int, rho0: float) -> dict:
        fig, summary = quick_compare(staleness, rho0, config, seeds, steps)
        display(fig)
        return summary
    return callback


# === 03 · BAPO's balance ==========================================================================

class Replayed(NamedTuple):
    """The batches a run trained on, one row per (update, seed): (steps·seeds, S·G) tensors."""
    ratio: torch.Tensor     # r = π_θ/π_b of each sample at the moment of its update
    adv: torch.Tensor       # its advantage
    mask: torch.Tensor      # all ones (every sample is one token)
    update: torch.Tensor    # (steps·seeds,) which update the row belongs to (0-based)


@_one_thread
def replay_batches(run: BanditRun) -> Replayed:
    """Rebuild the batches of a run made with ``keep_logits=True``.

    (A computation for notebook 03.) Sampling is a pure function of (seed, rollout index) and the
    behaviour logits (see :mod:`toy_rl.bandit.rng`), so the batch of update t is
    ``sample_batch(task, behaviour_history[t], seeds, rollout, G, advantage)`` with rollout t // E in
    reuse mode and t in lag mode; its ratio uses the logits before update t.
    """
    if run.logits_history is None or run.behaviour_history is None:
        raise ValueError("replay_batches needs a run made with simulate(..., keep_logits=True)")
    c = run.config
    task = make_task(c.preset, c.n_tokens, c.n_contexts, c.task_seed, c.torch_dtype)
    E = c.updates_per_batch
    ratios, advs = [], []
    for t in range(c.steps):
        rollout = t // E if c.mode == "reuse" else t
        b = sample_batch(task, run.behaviour_history[t], run.seeds, rollout, c.group_size, c.advantage)
        logp = log_probs(run.logits_history[t]).gather(-1, b.tokens)
        ratios.append(torch.exp(torch.clamp(logp - b.old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)))
        advs.append(b.advantages)
    n = len(run.seeds)
    ratio = torch.stack(ratios).reshape(c.steps * n, -1)
    adv = torch.stack(advs).reshape(c.steps * n, -1)
    update = torch.arange(c.steps).repeat_interleave(n)
    return Replayed(ratio, adv, torch.ones_like(ratio), update)


READINGS = ("grad share", "all share", "grad pos/neg", "all pos/neg", "Eq. 8 literal")


@_one_thread
def rho_readings(batches: Replayed, c_low: float, c_high: float) -> dict:
    """Every reading of ρ on the same batches at one fixed pair of bounds: {reading: (rows,) array}.

    "grad"/"all": which tokens count (see :mod:`toy_rl.clipping.balance`); "share" pos/(pos+neg),
    "pos/neg" pos/neg; "Eq. 8 literal": pos/|pos − neg| (the printed signed denominator, with the
    all-token masses). Rows with no advantage mass at all (every group all right or all wrong) are NaN.
    """
    empty = (batches.adv != 0).sum(1) == 0
    nan = lambda t: torch.where(empty, torch.nan, t).numpy()
    out = {}
    for count in ("grad", "all"):
        pos, neg = masses(batches.ratio, batches.adv, batches.mask, c_low, c_high, count)
        out[f"{count} share"] = nan(balance_of(pos, neg, "share"))
        out[f"{count} pos/neg"] = nan(balance_of(pos, neg, "pos_neg"))
    diff = (pos - neg).abs()                                      # the "all" masses
    out["Eq. 8 literal"] = nan(torch.where(diff > 0, pos / diff.clamp(min=1e-300), torch.full_like(pos, math.inf)))
    return out


PAPER_TARGET_SHARE = 0.4      # ρ0 of the paper, as a share; the same target as pos/neg is 0.4/0.6


def readings_table(readings: dict, target_share: float = PAPER_TARGET_SHARE) -> dict:
    """Summaries of :func:`rho_readings` over batches: median, the share of batches below the paper's
    target (ρ0 = 0.4 as a share, 0.667 as pos/neg, 0.4 read literally for Eq. 8), and how many batches
    count (those with advantage mass). {reading: dict(median, below_target, batches)}."""
    out = {}
    for name, v in readings.items():
        v = np.asarray(v, dtype=float)
        v = v[~np.isnan(v)]
        target = target_share / (1 - target_share) if "pos/neg" in name else target_share
        out[name] = dict(median=float(np.median(v)), below_target=float(np.mean(v < target)),
                         target=round(target, 3), batches=int(v.size))
    return out


def readings_figure(batches: Replayed, readings: dict):
    """The readings of ρ on the same batches, update by update (median over the seeds' batches).

    Left: the two shares (grad, all) with the targets in use: 0.4 (paper), 0.5 (= pos/neg 1.0, the
    authors' yaml), 1/3 (= pos/neg 0.5, their example script). Right: Eq. 8 read literally,
    pos/|pos − neg|, on a log axis. Returns (figure, {reading: per-update median})."""
    upd = batches.update.numpy()
    T = int(upd.max()) + 1
    per_update = {}
    for name, v in readings.items():
        v = np.asarray(v, dtype=float).copy()
        with warnings.catch_warnings():                 # an update whose batches are all NaN: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            per_update[name] = np.array([np.nanmedian(v[upd == t]) for t in range(T)])
    fig = Figure(figsize=(13, 3.8), layout="constrained")
    ax, ax8 = fig.subplots(1, 2)
    x = np.arange(1, T + 1)
    for name, colour in (("grad share", "tab:green"), ("all share", "tab:red")):
        if name in per_update:
            ax.plot(x, smooth(per_update[name], 5), color=colour, lw=1.8, label=f"{name} (median, mean of 5)")
    for y, text in ((0.4, "0.4: paper ρ0"), (0.5, "0.5 = pos/neg 1.0 (authors' yaml)"),
                    (1 / 3, "1/3 = pos/neg 0.5 (example script)")):
        ax.axhline(y, color="0.4", ls=":", lw=1)
        ax.annotate(text, (x[-1], y), ha="right", va="bottom", fontsize=7, color="0.3")
    ax.set_xlabel("optimizer update")
    ax.set_ylabel("ρ = pos/(pos+neg)")
    ax.set_title("the same batches, two ways of counting", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    if "Eq. 8 literal" in per_update:
        cap = 1e3
        eq8 = per_update["Eq. 8 literal"]
        ax8.semilogy(x, np.minimum(eq8, cap), color="tab:purple", lw=1.2, label="pos/|pos − neg| (median)")
        ax8.set_ylim(0.2, cap * 1.5)
        ax8.annotate(f"capped at {cap:g}: pos = neg on every fresh batch\n(r = 1 and GRPO advantages sum to 0)",
                     (0.98, 0.97), xycoords="axes fraction", ha="right", va="top", fontsize=7)
        ax8.axhline(0.4, color="0.4", ls=":", lw=1, label="0.4")
        ax8.set_xlabel("optimizer update")
        ax8.set_ylabel("Eq. 8 read literally")
        ax8.set_title("Eq. 8's signed denominator: explodes when pos ≈ neg", fontsize=10)
        ax8.legend(fontsize=8, loc="center right")
    return fig, per_update


@_one_thread
def rho_against_bound(batches: Replayed, which: str, values, other: float, count: str) -> np.ndarray:
    """ρ (share) on every batch as one bound moves: ``which`` "c_low" or "c_high" takes each of
    ``values`` (ascending) while the other bound stays at ``other``. Returns (rows, len(values)),
    NaN for rows with no advantage mass."""
    like = dict(dtype=batches.ratio.dtype)
    vals = torch.tensor(sorted(values), **like)
    if which == "c_low":
        neg = neg_mass_at(batches.ratio, batches.adv, batches.mask, vals, count)
        pos = pos_mass_at(batches.ratio, batches.adv, batches.mask, torch.tensor([other], **like), count).expand_as(neg)
    elif which == "c_high":
        pos = pos_mass_at(batches.ratio, batches.adv, batches.mask, vals, count)
        neg = neg_mass_at(batches.ratio, batches.adv, batches.mask, torch.tensor([other], **like), count).expand_as(pos)
    else:
        raise ValueError(f"which must be 'c_low' or 'c_high'; got {which!r}")
    rho = balance_of(pos, neg, "share")
    empty = (batches.adv != 0).sum(1) == 0
    return torch.where(empty[:, None], torch.nan, rho).numpy()


def rho_bound_figure(batches: Replayed, lows=None, highs=None, fixed_low: float = 0.6, fixed_high: float = 1.2,
                     rho0: float = 0.4):
    """ρ against c_low (c_high fixed) and against c_high (c_low fixed), counting gradient-carrying
    tokens vs all tokens, mean over the batches where the gradient-carrying ρ starts below ``rho0`` at
    [fixed_low, fixed_high] (those BAPO()'s search acts on) and over all batches with advantage mass.
    Returns (figure, {(which, count, subset): mean ρ curve}), subset "ρ below target" or "all batches"."""
    lows = np.round(np.arange(0.6, 0.9001, 0.02), 4) if lows is None else np.asarray(lows)
    highs = np.round(np.arange(1.2, 3.0001, 0.05), 4) if highs is None else np.asarray(highs)
    start = rho_against_bound(batches, "c_low", [fixed_low], fixed_high, "grad")[:, 0]
    low_start = start < rho0
    fig = Figure(figsize=(12, 4), layout="constrained")
    axes = fig.subplots(1, 2)
    out = {}
    for ax, which, values, other in ((axes[0], "c_low", lows, fixed_high), (axes[1], "c_high", highs, fixed_low)):
        for count, colour in (("grad", "tab:green"), ("all", "tab:red")):
            rho = rho_against_bound(batches, which, values, other, count)
            for subset, sel, ls in (("ρ below target", low_start, "-"), ("all batches", np.isfinite(start), ":")):
                if not sel.any():
                    continue
                with np.errstate(invalid="ignore"):
                    curve = np.nanmean(rho[sel], 0)
                out[which, count, subset] = curve
                ax.plot(values, curve, ls, color=colour, lw=2 if ls == "-" else 1.3, marker="o" if ls == "-" else None,
                        ms=3, label=f"count={count!r}, {subset} ({int(sel.sum())} batches)")
        ax.axhline(rho0, color="0.3", ls="--", lw=1, label=f"ρ0 = {rho0}")
        ax.set_xlabel(which + (f" (c_high = {fixed_high})" if which == "c_low" else f" (c_low = {fixed_low})"))
        ax.set_ylabel("ρ = pos/(pos+neg), mean over batches")
        ax.set_title(f"raising {which}", fontsize=10)
        ax.legend(fontsize=7)
    return fig, out


@_one_thread
def search_landing(batches: Replayed, rules: dict) -> dict:
    """Where each BAPO variant's search lands on the same batches (rows with advantage mass only).

    Returns {name: dict(c_low, c_high (mean), rho_before, rho_after (mean share, pos/neg converted),
    reached (fraction of batches), moved (fraction where the search took a step), low_moved (fraction where
    c_low left a⁻), steps (mean))}.
    """
    keep = (batches.adv != 0).any(1)
    r, a, m = batches.ratio[keep], batches.adv[keep], batches.mask[keep]
    out = {}
    for name, rule in rules.items():
        s = rule.search(r, a, m)
        rho_path = s["rho_path"]
        before = rho_path[:, 0]
        after = rho_path.gather(1, s["stop"][:, None])[:, 0]
        as_share = (lambda t: t / (1 + t)) if rule.balance == "pos_neg" else (lambda t: t)
        out[name] = dict(c_low=float(s["c_low"].mean()), c_high=float(s["c_high"].mean()),
                         rho_before=float(torch.nan_to_num(as_share(before), nan=1.0).mean()),
                         rho_after=float(torch.nan_to_num(as_share(after), nan=1.0).mean()),
                         reached=float((after >= rule.rho0).double().mean()),
                         moved=float((s["stop"] > 0).double().mean()),
                         low_moved=float((s["c_low"] > rule.low_range[0] + 1e-9).double().mean()),
                         steps=float(s["stop"].double().mean()), batches=int(keep.sum()))
    return out


def ablation_figure(ablations: dict, base=(0.8, 1.2)):
    """The paper's Fig. 7 at toy scale: mean reward and final entropy (95% bands over seeds) as c_high
    rises with c_low at ``base[0]``, and as c_low moves with c_high at ``base[1]``.

    ``ablations``: {staleness: {(c_low, c_high): BanditRun}} (from ``bounds_ablation``).
    Returns (figure, {staleness: {(c_low, c_high): {"mean_reward": ..., "final_entropy": ...}}})."""
    fig = Figure(figsize=(11, 6.4), layout="constrained")
    axes = fig.subplots(2, 2)
    colours = ["tab:blue", "tab:purple", "tab:red", "tab:orange"]
    out = {}
    for i, (k, runs) in enumerate(sorted(ablations.items())):
        per = {b: per_seed_summary(run) for b, run in runs.items()}
        out[k] = {b: dict(mean_reward=float(v["mean_reward"].mean()), final_entropy=float(v["final_entropy"].mean()))
                  for b, v in per.items()}
        for col, (fixed_at, vary) in enumerate(((0, 1), (1, 0))):     # col 0: vary c_high; col 1: vary c_low
            pairs = sorted((b for b in per if b[fixed_at] == base[fixed_at]), key=lambda b: b[vary])
            xs = [b[vary] for b in pairs]
            for row, metric in enumerate(("mean_reward", "final_entropy")):
                bands = [confidence_band(per[b][metric]) for b in pairs]
                m = np.array([b[0] for b in bands])
                err = np.array([[b[0] - b[1], b[2] - b[0]] for b in bands]).T
                axes[row, col].errorbar(xs, m, yerr=err, marker="o", capsize=3, color=colours[i % 4],
                                        label=f"staleness {k}")
    for col, name in enumerate(("c_high", "c_low")):
        other = f"c_low = {base[0]}" if name == "c_high" else f"c_high = {base[1]}"
        axes[0, col].set_title(f"{'raising' if name == 'c_high' else 'moving'} {name} ({other})", fontsize=10)
        axes[1, col].set_xlabel(name)
    axes[0, 0].set_ylabel("mean expected reward over updates")
    axes[1, 0].set_ylabel("final entropy (nats)")
    axes[0, 0].legend(fontsize=8)
    return fig, out


def format_rows(rows: dict, keys, digits: int = 3) -> str:
    """A plain-text table: one row per name in ``rows`` ({name: {key: number}}), one column per key."""
    width = max(len(str(n)) for n in rows) + 2
    head = "".ljust(width) + "".join(k.rjust(max(12, len(k) + 2)) for k in keys)
    lines = [head]
    for name, row in rows.items():
        cells = []
        for k in keys:
            v = row.get(k, math.nan)
            cells.append((f"{v:.{digits}f}" if isinstance(v, (float, np.floating)) else str(v)).rjust(max(12, len(k) + 2)))
        lines.append(str(name).ljust(width) + "".join(cells))
    return "\n".join(lines)


def runs_table(runs: dict) -> dict:
    """Per run (any keys): mean reward, final entropy, mean bounds, ρ (as a share), how often the search
    moved c_low off a⁻ and how often ρ reached the target; {key: dict}."""
    out = {}
    for key, run in runs.items():
        s = per_seed_summary(run)
        m = run.metrics
        rule = run.extra.get("rule_obj")
        rho = m["rho"]
        if getattr(rule, "balance", "share") == "pos_neg":               # pos/neg -> share; neg = 0 -> 1
            with np.errstate(invalid="ignore"):
                rho = np.where(np.isinf(rho), 1.0, rho / (1 + rho))
        low0 = rule.low_range[0] if isinstance(rule, BAPO) else float(np.nanmin(m["c_low"]))
        out[key] = dict(mean_reward=float(s["mean_reward"].mean()), final_entropy=float(s["final_entropy"].mean()),
                        c_low=float(s["c_low"].mean()), c_high=float(s["c_high"].mean()),
                        rho_share=float(np.nanmean(rho)),
                        low_moved=float((m["c_low"] > low0 + 1e-9).mean()),
                        reached=float(np.nanmean(m["rho_reached"])) if "rho_reached" in m else math.nan)
    return out
