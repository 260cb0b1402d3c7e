"""What every rung's views share: rule colours, one smoothing, 95% bands over seeds, fixed bounds for the
sliders and the plain-text tables printed beside a figure.

Views build their own ``matplotlib.figure.Figure`` (no pyplot state) and return it with the numbers they
drew. Why not pyplot: ipywidgets 8.1's ``interact`` flushes inline figures only when matplotlib names its
backend "module://matplotlib_inline...", and matplotlib >= 3.9 says "inline", so a pyplot figure drawn inside
a slider callback never redraws. The ``*_callback`` factories display the Figure themselves.
"""
from __future__ import annotations

import math

import numpy as np

from .clipping import RULES, ClipHigher
from .stats import confidence_band

RULE_NAMES = RULES           # "symmetric", "clip-higher", "bapo": toy_rl.clipping.RULES, the one list of rule names
RULE_COLOURS = dict(zip(RULE_NAMES, ("tab:blue", "tab:orange", "tab:green")))
SCENARIO_COLOURS = {"on-policy": "0.15", "reuse-2": "tab:blue", "reuse-4": "tab:purple", "reuse-8": "tab:red",
                    "lag-2": "tab:cyan", "lag-4": "tab:olive", "lag-8": "tab:brown"}
FALLBACK_COLOURS = tuple(f"C{i}" for i in range(3, 10))     # C0-C2 are the three rules' colours


def colour_of(label: str, i: int = 0) -> str:
    """The colour of a rule or scenario label, the same in every figure: the three rules and the rung-2
    scenarios have their own; "partial-*" is orange; any other label (e.g. "fixed-0.6-1.2", "bapo-rho0.5")
    gets the ``i``-th of the remaining colours, so ``i`` = its position in the figure keeps them apart."""
    label = str(label)
    if label in RULE_COLOURS:
        return RULE_COLOURS[label]
    if label in SCENARIO_COLOURS:
        return SCENARIO_COLOURS[label]
    if label.startswith("partial"):
        return "tab:orange"
    return FALLBACK_COLOURS[i % len(FALLBACK_COLOURS)]


def smooth(values, window: int = 1) -> np.ndarray:
    """Trailing moving average over the last axis: point t is the mean of the measured values among the last
    ``window`` points up to t (fewer at the start). NaNs are skipped, not spread: a window with no measured
    value is NaN, and one missing update does not blank the rest of the curve. ``window`` <= 1: unchanged.

    (Without NaNs this equals a plain trailing mean; rung 3's old copy differed only in letting one NaN turn
    every later point into NaN.)
    """
    v = np.asarray(values, dtype=float)
    if window <= 1 or v.size == 0:
        return v
    ok = np.isfinite(v)
    kernel = np.ones(int(window))
    conv = lambda a: np.apply_along_axis(lambda r: np.convolve(r, kernel)[: r.shape[0]], -1, a)
    num, den = conv(np.where(ok, v, 0.0)), conv(ok.astype(float))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)


# The values a logged metric can take: a band is cut to them (a Student-t band over 3 seeds of a clip fraction
# near 0 reaches below 0, which no clip fraction can).
RANGES = {"accuracy": (0, 1), "reward_mean": (0, 1), "rho": (0, 1), "clip_frac": (0, 1), "clip_frac_low": (0, 1),
          "clip_frac_high": (0, 1), "mixed_versions": (0, 1), "entropy": (0, None), "grad_norm": (0, None),
          "approx_kl": (0, None), "staleness_mean": (0, None), "staleness_max": (0, None), "groups": (0, None)}
MARKERS = ("o", "s", "^", "D", "v", "P")   # one per line of a panel, so that lines drawn on top of each other show


def mark_every(line: int, points: int, marks: int = 8) -> tuple[int, int]:
    """matplotlib's ``markevery`` for the ``line``-th line of a panel: about ``marks`` markers, each line starting a
    third of the spacing after the one before, so that the markers of coinciding lines do not cover each other."""
    every = max(1, points // marks)
    return line * every // 3 % every, every


def band(ax, x, values, colour, label=None, window: int = 1, ls="-", limits=None, marker=None):
    """Draw the mean over seeds (axis 0 of ``values``, (seeds, points)) and its 95% Student-t band
    (:func:`toy_rl.stats.confidence_band`), each seed smoothed over ``window`` points first; returns the mean.
    ``limits``: (low, high) the quantity cannot leave (None: open), the band is cut to it (:data:`RANGES`);
    ``marker``: drawn at about 8 points of the line, so that coinciding lines stay visible; each marker of
    :data:`MARKERS` starts at its own offset, so that the markers of coinciding lines do not cover each other."""
    mean, lo, hi = confidence_band(smooth(values, window))
    if limits is not None:
        lo, hi = np.clip(lo, *limits), np.clip(hi, *limits)
    extra = dict(marker=marker, markevery=mark_every(MARKERS.index(marker) if marker in MARKERS else 0, len(mean)),
                 markersize=4) if marker else {}
    ax.plot(x, mean, ls, color=colour, lw=1.8, label=label, **extra)
    ax.fill_between(x, lo, hi, color=colour, alpha=0.2, lw=0)
    return mean


def window_label(window: int) -> str:
    """' (mean of 10)' for an axis label, '' for no smoothing."""
    return f" (mean of {window})" if window > 1 else ""


def label_panel(ax, metric: str, label: str, xlabel: str, window: int = 1, rho0: float | None = None) -> None:
    """The decorations every training panel shares: the ρ0 line on a ``rho`` panel, the ratio-1 line and
    the solid/dashed key on a ``bounds`` panel, and the axis labels (the x label notes the smoothing)."""
    if metric == "rho" and rho0 is not None:
        ax.axhline(rho0, color="0.3", ls=":", lw=1, label=f"ρ0 = {rho0}")
    if metric == "bounds":
        ax.axhline(1.0, color="0.6", lw=0.6)
        ax.set_title("solid c_high, dashed c_low", fontsize=9)
    ax.set_xlabel(xlabel + window_label(window))
    ax.set_ylabel(label, fontsize=9)


def fixed_bounds(c_low: float, c_high: float) -> ClipHigher:
    """A fixed rule with ratio bounds [c_low, c_high] (0 < c_low < 1 < c_high), for the bound sliders."""
    if not (0 < c_low < 1 < c_high):
        raise ValueError(f"bounds must satisfy 0 < c_low < 1 < c_high; got ({c_low!r}, {c_high!r})")
    return ClipHigher(eps_low=1.0 - c_low, eps_high=c_high - 1.0)


def paired_differences(ax, rows: list, endpoint: str, xlabel: str, alpha: float = 0.05) -> list:
    """A forest plot of a comparison table's paired tests: for each row with ``diff_<endpoint>``, the difference
    (reference − row's rule) and its 95% interval by seed, the dot filled where ``p_holm_<endpoint>`` < ``alpha``.
    Returns the rows drawn."""
    tested = [r for r in rows if np.isfinite(r.get(f"diff_{endpoint}", math.nan))]
    for k, r in enumerate(tested):
        d, lo, hi = r[f"diff_{endpoint}"], r[f"diff_{endpoint}_lo"], r[f"diff_{endpoint}_hi"]
        colour = colour_of(r["rule"], k)
        filled = r.get(f"p_holm_{endpoint}", math.nan) < alpha
        ax.plot([lo, hi], [k, k], color=colour, lw=2)
        ax.plot([d], [k], "o", color=colour, mfc=colour if filled else "white", ms=7)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(np.arange(len(tested)), [r["rule"] for r in tested], fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel=xlabel)
    return tested


def format_rows(rows: dict, keys, digits: int = 3) -> str:
    """A plain-text table: one row per name in ``rows`` ({name: {key: number}}), one column per key."""
    width = max(len(str(n)) for n in rows) + 2
    head = "".ljust(width) + "".join(k.rjust(max(12, len(k) + 2)) for k in keys)
    lines = [head]
    for name, row in rows.items():
        cells = []
        for k in keys:
            v = row.get(k, math.nan)
            text = f"{v:.{digits}f}" if isinstance(v, (float, np.floating)) else str(v)
            cells.append(text.rjust(max(12, len(k) + 2)))
        lines.append(str(name).ljust(width) + "".join(cells))
    return "\n".join(lines)

