"""The clipped surrogate of one token as a function of its ratio r (BAPO Eq. 3), and BAPO's search traced.

Pure functions behind notebook 00's plots and sliders: the maths takes numbers
or numpy arrays; plotting functions draw onto Axes they are given and return
numbers a test can check. Per token, with ratio r = π_θ / π_behaviour and advantage A:

    surrogate(r) = min(r·A, clip(r, c_low, c_high)·A)          (BAPO Eq. 3; PPO)
    dual-clip c (A < 0 only): max(surrogate(r), c·A)            (Ye et al. 2020; verl clip_ratio_c)

d surrogate / dr is A where the token still carries gradient and 0 where it is
clipped: A > 0 tokens above c_high, A < 0 tokens below c_low (and, with
dual-clip, A < 0 tokens above c). At the bounds themselves (a kink, measure
zero) we say the gradient still flows, as torch's autograd does for the loss
and as ``policy_loss``'s clip fractions count (r > c_high, r < c_low clipped).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from matplotlib.figure import Figure

from .clipping import ClipHigher, policy_loss, token_ratio


# --- the maths ------------------------------------------------------------------------------------

def check_bounds(c_low: float, c_high: float, dual_clip: float | None = None) -> None:
    """Raise ValueError unless 0 < c_low ≤ 1 ≤ c_high, c_low < c_high, and dual_clip is None or > 1."""
    for name, v in (("c_low", c_low), ("c_high", c_high)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"{name} must be a finite number; got {v!r}")
    if not 0 < c_low <= 1:
        raise ValueError(f"c_low must lie in (0, 1] (it clips ratios below 1); got {c_low!r}")
    if c_high < 1:
        raise ValueError(f"c_high must be >= 1 (it clips ratios above 1); got {c_high!r}")
    if not c_low < c_high:
        raise ValueError(f"c_low must be below c_high; got c_low={c_low!r}, c_high={c_high!r}")
    if dual_clip is not None and not (isinstance(dual_clip, (int, float)) and dual_clip > 1):
        raise ValueError(f"dual_clip must be None or a number > 1 (verl uses 3.0); got {dual_clip!r}")


def surrogate(r, adv, c_low: float, c_high: float, dual_clip: float | None = None) -> np.ndarray:
    """Per-token surrogate min(r·A, clip(r, c_low, c_high)·A) (BAPO Eq. 3), to maximise; broadcasts r and A."""
    check_bounds(c_low, c_high, dual_clip)
    r, a = np.broadcast_arrays(np.asarray(r, dtype=float), np.asarray(adv, dtype=float))
    out = np.minimum(r * a, np.clip(r, c_low, c_high) * a)
    if dual_clip is not None:
        out = np.where(a < 0, np.maximum(out, dual_clip * a), out)
    return out


def carries_gradient(r, adv, c_low: float, c_high: float, dual_clip: float | None = None) -> np.ndarray:
    """True where the surrogate still depends on r: A > 0 and r ≤ c_high, or A < 0 and r ≥ c_low
    (and r ≤ dual_clip when given). A = 0 tokens never carry gradient."""
    check_bounds(c_low, c_high, dual_clip)
    r, a = np.broadcast_arrays(np.asarray(r, dtype=float), np.asarray(adv, dtype=float))
    neg_ok = r >= c_low
    if dual_clip is not None:
        neg_ok &= r <= dual_clip
    return ((a > 0) & (r <= c_high)) | ((a < 0) & neg_ok)


def surrogate_slope(r, adv, c_low: float, c_high: float, dual_clip: float | None = None) -> np.ndarray:
    """d surrogate / dr: A where the token carries gradient, 0 where it is clipped."""
    r, a = np.broadcast_arrays(np.asarray(r, dtype=float), np.asarray(adv, dtype=float))
    return np.where(carries_gradient(r, a, c_low, c_high, dual_clip), a, 0.0)


def gradient_interval(sign: int, c_low: float, c_high: float, r_range=(0.0, 3.0),
                      dual_clip: float | None = None) -> tuple[float, float]:
    """The interval of r inside ``r_range`` where a token with advantage sign ``sign`` (+1/−1) carries
    gradient; (nan, nan) if there is none."""
    check_bounds(c_low, c_high, dual_clip)
    if sign not in (1, -1):
        raise ValueError(f"sign must be +1 or -1; got {sign!r}")
    r0, r1 = r_range
    lo, hi = (r0, min(c_high, r1)) if sign > 0 else (max(c_low, r0), min(dual_clip or math.inf, r1))
    return (lo, hi) if lo < hi else (math.nan, math.nan)


# --- plots and the slider callback ----------------------------------------------------------------

PANELS = {"pos": (+1, "A > 0 (here A = +1)"), "neg": (-1, "A < 0 (here A = −1)")}


def plot_surrogate(axes, c_low: float, c_high: float, r_range=(0.0, 3.0), dual_clip: float | None = None,
                   label: str = "", search_ranges=None, ratios=None) -> dict:
    """Draw the surrogate against r on two Axes (A > 0, A < 0), shading where gradient flows.

    ``search_ranges``: optional ((a⁻, b⁻), (a⁺, b⁺)), BAPO's ranges, drawn as bars on the r axis.
    ``ratios``: optional (r of A > 0 tokens, r of A < 0 tokens), histogrammed in grey.
    Returns per panel ("pos", "neg"): ``grad_interval`` and its width ``grad_width``.
    """
    r = np.linspace(*r_range, 601)
    out = {}
    for ax, (key, (sign, title)) in zip(axes, PANELS.items()):
        lo, hi = gradient_interval(sign, c_low, c_high, r_range, dual_clip)
        width = 0.0 if math.isnan(lo) else hi - lo
        out[key] = {"grad_interval": (lo, hi), "grad_width": width}
        tokens = None if ratios is None else ratios[0 if key == "pos" else 1]
        if tokens is not None and len(tokens):
            twin = ax.twinx()
            twin.hist(np.clip(tokens, *r_range), bins=60, range=r_range, color="0.6", alpha=0.35)
            twin.set_ylabel("tokens in batch", color="0.45")
            twin.tick_params(axis="y", colors="0.45")
            ax.set_zorder(twin.get_zorder() + 1)          # curves above the histogram
            ax.patch.set_visible(False)
        if width > 0:
            ax.axvspan(lo, hi, color="tab:green", alpha=0.12, label="gradient flows")
        if search_ranges is not None:
            for i, (a, b) in enumerate(search_ranges):
                ax.axvspan(a, b, ymin=0, ymax=0.04, color="tab:purple", alpha=0.6,
                           label="BAPO search ranges" if i == 0 else None)
        ax.plot(r, sign * r, "--", color="0.5", lw=1, label="r·A (unclipped)")
        ax.plot(r, surrogate(r, sign, c_low, c_high, dual_clip), color="tab:blue", lw=2.2, label="clipped surrogate")
        marks = [(c_low, "c_low"), (c_high, "c_high")] + ([(dual_clip, "dual-clip c")] if dual_clip and sign < 0 else [])
        for x, name in marks:
            ax.axvline(x, color="tab:red", lw=1, ls=":")
            ax.annotate(f"{name}={x:.2f}", (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                        va="top", ha="right", fontsize=8, color="tab:red")
        ax.set_xlim(*r_range)
        ax.set_xlabel("ratio r = π_θ / π_behaviour")
        ax.set_ylabel("surrogate")
        ax.set_title(f"{label}: {title}" if label else title, fontsize=10)
    axes[0].legend(loc="lower right", fontsize=8)
    return out


def fixed_rule(c_low: float, c_high: float) -> ClipHigher:
    """A fixed rule with ratio bounds [c_low, c_high] (needs c_low < 1 < c_high: epsilons are > 0)."""
    return ClipHigher(eps_low=1.0 - c_low, eps_high=c_high - 1.0)


def surrogate_view(c_low: float, c_high: float, batch=None, r_range=(0.0, 3.0), dual_clip: float | None = None):
    """What the notebook's sliders show: the two panels for [c_low, c_high], and a summary.

    With a ``batch`` (``toy_rl.synthetic.StaleBatch``) its token ratios are histogrammed and the
    summary adds what ``policy_loss`` reports at these bounds (clip fractions, ρ, loss).
    Returns (figure, summary dict of floats).
    """
    check_bounds(c_low, c_high, dual_clip)
    ratios = None
    if batch is not None:
        ratio, adv, mask = batch_tokens(batch)
        r, a, m = (t[0].detach().cpu().numpy() for t in (ratio, adv, mask))
        m = m > 0
        ratios = (r[m & (a > 0)], r[m & (a < 0)])
    fig = Figure(figsize=(11, 3.6), layout="constrained")    # not pyplot's: no global state, shown on request
    axes = fig.subplots(1, 2)
    panels = plot_surrogate(axes, c_low, c_high, r_range, dual_clip, ratios=ratios)
    summary = {"c_low": c_low, "c_high": c_high,
               "grad_width_pos": panels["pos"]["grad_width"], "grad_width_neg": panels["neg"]["grad_width"]}
    if batch is not None:
        _, stats = policy_loss(batch.logp, batch.old_logp, batch.advantages, batch.mask,
                               fixed_rule(c_low, c_high), dual_clip=dual_clip)
        summary.update({k: stats[k] for k in ("clip_frac_low", "clip_frac_high", "rho", "loss")})
    return fig, {k: round(float(v), 4) for k, v in summary.items()}


def slider_callback(batch=None, r_range=(0.0, 3.0)):
    """The function ``ipywidgets.interact`` calls: (c_low, c_high) -> summary dict (interact shows it).

    The callback displays its figure itself: ipywidgets 8.1's interact flushes inline figures only
    when matplotlib names its backend "module://matplotlib_inline...", and matplotlib ≥ 3.9 says "inline",
    so a pyplot figure would never redraw when a slider moves.
    """
    from IPython.display import display

    def callback(c_low: float, c_high: float) -> dict:
        fig, summary = surrogate_view(c_low, c_high, batch=batch, r_range=r_range)
        display(fig)
        return summary
    return callback


# --- rules side by side, and BAPO's search step by step -------------------------------------------

def batch_tokens(batch):
    """(ratio, advantage, mask) of a batch, flattened to (1, tokens) as ``BAPO.search`` takes them;
    r = exp(clamp(logp − old_logp, ±20)) as in ``policy_loss``."""
    ratio = token_ratio(batch.logp, batch.old_logp)
    adv = batch.advantages.reshape(batch.mask.shape[0], -1).expand_as(batch.mask)
    return ratio.reshape(1, -1), adv.reshape(1, -1), batch.mask.reshape(1, -1)


def compare_rules(batch, rules: dict, **loss_kw) -> dict:
    """``policy_loss`` stats of one batch under each rule: {name: stats}."""
    return {name: policy_loss(batch.logp, batch.old_logp, batch.advantages, batch.mask, rule, **loss_kw)[1]
            for name, rule in rules.items()}


def format_table(rows: dict, keys=("c_low", "c_high", "rho", "clip_frac_low", "clip_frac_high", "loss")) -> str:
    """A plain-text table: one row per name in ``rows`` ({name: {key: number}}), one column per key."""
    width = max(len(n) for n in rows) + 2
    lines = ["".ljust(width) + "".join(k.rjust(15) for k in keys)]
    lines += [name.ljust(width) + "".join(f"{float(s[k]):15.4f}" for k in keys) for name, s in rows.items()]
    return "\n".join(lines)


class TraceStep(NamedTuple):
    step: int        # 0 = the starting bounds (a⁻, a⁺)
    c_low: float
    c_high: float
    rho: float       # ρ at these bounds, as the rule measures it (count, balance)


def bapo_trace(batch, rule) -> list[TraceStep]:
    """BAPO's search (Algorithm 1) on one batch, step by step up to where it stops, via ``rule.search``.

    The last row holds the bounds the update uses; the target was reached iff its ρ ≥ ``rule.rho0``.
    """
    s = rule.search(*batch_tokens(batch))
    stop = int(s["stop"][0])
    return [TraceStep(i, round(float(s["path_low"][i]), 6), round(float(s["path_high"][i]), 6),
                      float(s["rho_path"][0, i])) for i in range(stop + 1)]


def plot_bapo_traces(axes, traces: dict) -> dict:
    """Draw each variant's search in one column of a 2 × n Axes grid: ρ per step (top), bounds (bottom).

    ``traces``: {name: (rule, bapo_trace(...))}. Returns {name: (steps, c_low, c_high, rho, reached)}.
    """
    axes = np.asarray(axes).reshape(2, -1)
    out = {}
    for col, (name, (rule, rows)) in enumerate(traces.items()):
        top, bottom = axes[0, col], axes[1, col]
        steps = [t.step for t in rows]
        last = rows[-1]
        reached = last.rho >= rule.rho0
        top.plot(steps, [t.rho for t in rows], "o-", ms=3, color="tab:blue")
        top.axhline(rule.rho0, color="tab:orange", ls="--", lw=1, label=f"target ρ0 = {rule.rho0}")
        top.set_title(f"{name}\n({rule.balance}, count={rule.count}, {rule.order})", fontsize=9)
        top.set_ylabel("ρ = pos/(pos+neg)" if rule.balance == "share" else "ρ = pos/neg")
        top.legend(fontsize=8, loc="best")
        bottom.plot(steps, [t.c_high for t in rows], "o-", ms=3, color="tab:red", label="c_high")
        bottom.plot(steps, [t.c_low for t in rows], "o-", ms=3, color="tab:green", label="c_low")
        bottom.set_xlabel("search step")
        bottom.set_ylabel("bound")
        bottom.legend(fontsize=8, loc="best")
        top.plot([last.step], [last.rho], "*", ms=12, color="tab:green" if reached else "tab:red")
        bottom.set_title(f"stops at [{last.c_low:.2f}, {last.c_high:.2f}]: "
                         + ("target reached" if reached else "target NOT reached"), fontsize=9)
        out[name] = (last.step, last.c_low, last.c_high, last.rho, reached)
    return out


def rho_change_by_bound(rows: list[TraceStep]) -> dict:
    """How much ρ changed, summed over the steps that raised c_high and over those that raised c_low."""
    out = {"c_high": 0.0, "c_low": 0.0}
    for prev, cur in zip(rows, rows[1:]):
        out["c_high" if cur.c_high != prev.c_high else "c_low"] += cur.rho - prev.rho
    return out
