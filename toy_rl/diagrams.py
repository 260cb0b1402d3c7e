"""Schematic teaching diagrams: where stale tokens come from, which tokens clipping silences, how BAPO searches.

Each function draws one idea of the course as a small ``matplotlib.figure.Figure`` (about 8 x 2.6 inches, no
pyplot state, no randomness beyond a fixed seed), so a notebook cell that ends with the call shows it once.
:data:`ALT` holds one sentence per diagram: the alt text, which the markdown cell before each figure repeats.
Each figure gives colour one meaning (token age, policy version, "clipped", or "visited by the search").
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

ALT = {
    "reuse_timeline": "Staleness by reuse: one rollout sampled by policy version v serves several optimizer updates "
                      "(split into mini-batches, or whole as PPO epochs), so each later update trains on it with a "
                      "policy one, two or more updates newer than the one that sampled it.",
    "lag_timeline": "Staleness by lag: the sampler runs a fixed number of policy versions behind the trainer, so "
                    "the batch trained on at update v was sampled by the policy of update v minus the lag.",
    "partial_rollout_timeline": "Partial rollout: each step writes at most a budget of tokens of every unfinished "
                                "answer, so a long answer is written by several policy versions and its first tokens "
                                "are the oldest when it is trained on, while a short answer finishes in one step.",
    "quadrants": "The four quadrants of the clipped surrogate: a good token (A > 0) loses its gradient only above "
                 "c_high, a bad token (A < 0) only below c_low, and the other two quadrants keep their gradient.",
    "bapo_search_path": "BAPO's search in the plane of the two bounds: from the start [0.6, 1.2] it raises the upper "
                        "bound step by step up to 3.0, then the lower bound towards 0.9, and stops at the first point "
                        "where positive tokens carry at least a share 0.4 of the gradient-carrying mass.",
}

SIZE = (8.0, 2.6)           # inches
FONT = 9.5                  # points: the smallest text in every diagram
INK, GRID, CLIPPED = "0.15", "0.75", "0.82"       # text and lines; unvisited path; the neutral "clipped" shade
ACCENT = "tab:blue"         # bapo_search_path: the points the search visits

# BAPO's defaults (paper §5.1), as toy_rl.clipping.BAPO() has them (tests/test_diagrams.py checks they agree)
RHO0, LOW_RANGE, HIGH_RANGE, LOW_STEP, HIGH_STEP = 0.4, (0.6, 0.9), (1.2, 3.0), 0.02, 0.05
_TOL = 1e-9                 # float noise in the loop guards, as BAPO.search_loop: 0.6 + 15 x 0.02 ~ 0.9


def _figure(axes: int = 1, widths=None) -> tuple[Figure, list]:
    fig = Figure(figsize=SIZE, layout="constrained")
    axs = fig.subplots(1, axes, width_ratios=widths)
    return fig, list(np.atleast_1d(axs))


def _lanes(ax, names, x_lo: float, x_hi: float) -> None:
    """A timeline axes: lanes named on the left (top first), no frame, no ticks."""
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(-0.6, len(names) - 0.4)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    ax.set_xticks([])
    ax.set_yticks(range(len(names)), list(reversed(names)), fontsize=FONT + 0.5)
    ax.tick_params(axis="y", length=0)


def _box(ax, x: float, y: float, w: float, text: str, face, h: float = 0.62, dark: bool = False) -> None:
    """A box centred at (x, y), ``w`` wide, with centred text."""
    ax.add_patch(Rectangle((x - w / 2, y - h / 2), w, h, facecolor=face, edgecolor=INK, lw=0.8))
    ax.text(x, y, text, ha="center", va="center", fontsize=FONT, color="white" if dark else INK)


def _arrow(ax, start, end) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, color=INK, lw=0.9,
                                 shrinkA=0, shrinkB=0))


def _version(k: int) -> str:
    """The policy version v + k, as mathtext."""
    return r"$\pi_{v}$" if k == 0 else (rf"$\pi_{{v+{k}}}$" if k > 0 else rf"$\pi_{{v-{-k}}}$")


def _age_colours(oldest: int):
    """One colour per age (or version) 0..oldest, light to dark; and whether text on each must be white."""
    from matplotlib import colormaps
    span = max(oldest, 1)
    colours = [colormaps["Blues"](0.2 + 0.7 * a / span) for a in range(oldest + 1)]
    luminance = [0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b, _ in colours]
    return colours, [y < 0.4 for y in luminance]


def _update(k: int) -> str:
    """The update (or step) v + k, as text."""
    return "v" if k == 0 else (f"v+{k}" if k > 0 else f"v-{-k}")


def _check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
    return int(value)


# --- 1-3: where stale tokens come from -----------------------------------------------------------------------

def reuse_timeline(staleness: int = 2, mode: str = "minibatches") -> Figure:
    """Staleness by reuse (docs/glossary.md, "Staleness"; the paper's "2x, 4x, 8x staleness", §5.1).

    Teaches: one rollout, sampled by policy version v, serves K + 1 = ``staleness`` + 1 optimizer updates, so the
    data of update v + i is i updates stale: its ratios drift from 1 although nothing was sampled late.
    ``mode``: "minibatches" (rung 2's reuse: K + 1 disjoint mini-batches, one update each) or "epochs" (rung 1's
    bandit: the whole batch once per update, as PPO epochs). Colour: the token age at the update.
    """
    k = _check_int("staleness", staleness, 0)
    if mode not in ("minibatches", "epochs"):
        raise ValueError(f"mode must be 'minibatches' or 'epochs'; got {mode!r}")
    if k > 8:
        raise ValueError(f"staleness must be at most 8 to stay readable; got {k}")
    fig, (ax,) = _figure()
    _lanes(ax, ["sampler", "trainer"], -2.6, k + 1.9)
    colours, dark = _age_colours(k)
    _box(ax, -1.5, 1, 1.8, f"rollout sampled\nby {_version(0)}", "white")
    for i in range(k + 1):
        part = f"mini-batch {i + 1}/{k + 1}" if mode == "minibatches" else f"whole batch\n(epoch {i + 1})"
        _box(ax, i, 0, 0.9, f"{part}\nage {i}", colours[i], dark=dark[i])
        ax.text(i, -0.45, f"update {_update(i)}", ha="center", va="top", fontsize=FONT)
        _arrow(ax, (-0.6, 0.85), (i - 0.3, 0.31))
    _box(ax, k + 1.25, 1, 1.1, f"next rollout\nby {_version(k + 1)}", "white")
    what = "split into" if mode == "minibatches" else "reused for"
    ax.set_title(f"Staleness by reuse (K = {k}): one rollout {what} K + 1 = {k + 1} updates", fontsize=FONT + 1)
    return fig


def lag_timeline(lag: int = 2) -> Figure:
    """Staleness by lag (docs/glossary.md, "Staleness": asynchronous generation, the paper's off-policy setting).

    Teaches: a sampler ``lag`` policy versions behind the trainer hands each batch over ``lag`` updates later, so
    update v trains on a batch sampled by the policy of update v - lag; every batch is used once, every token is
    ``lag`` updates stale. Colour: the token age at the update (the same for every steady-state batch).
    """
    k = _check_int("lag", lag, 1)
    if k > 6:
        raise ValueError(f"lag must be at most 6 to stay readable; got {k}")
    updates = 4
    fig, (ax,) = _figure()
    _lanes(ax, ["sampler", "trainer"], -k - 0.6, updates - 0.4)
    colours, dark = _age_colours(k)
    for t in range(-k, updates):
        _box(ax, t, 1, 0.82, f"sample\nwith {_version(t)}", "white")
        if t >= 0:
            _box(ax, t, 0, 0.82, f"update {_update(t)}\nage {k}", colours[k], dark=dark[k])
    for t in range(-k, updates - k):
        _arrow(ax, (t + 0.1, 0.69), (t + k - 0.1, 0.31))
    ax.set_title(f"Staleness by lag (lag = {k}): update v trains on a batch sampled by {_version(-k)}",
                 fontsize=FONT + 1)
    return fig


def _segments(length: int, budget: int) -> list[tuple[int, int]]:
    """(first token, tokens) of each step's piece of an answer ``length`` tokens long."""
    return [(s, min(budget, length - s)) for s in range(0, length, budget)]


def partial_rollout_timeline(budget: int = 8, lengths=(40, 19, 6)) -> Figure:
    """Partial rollout (docs/glossary.md, "Partial rollout"; notebook 05; the paper's off-policy settings, §5.1).

    Teaches: each step writes at most ``budget`` more tokens of every unfinished answer, under the policy of
    that step, so an answer of ``lengths[i]`` tokens spans ceil(length / budget) policy versions: one answer mixes
    versions, and when it is trained on (the step it finishes) its first tokens are the oldest. A short answer
    finishes in one step and is on-policy. Colour: the policy version that wrote each piece.
    """
    budget = _check_int("budget", budget, 1)
    lengths = [_check_int("each answer length", n, 1) for n in lengths]
    if not 1 <= len(lengths) <= 4:
        raise ValueError(f"lengths must hold 1 to 4 answer lengths; got {len(lengths)}")
    steps = max(math.ceil(n / budget) for n in lengths)
    fig, (ax,) = _figure()
    longest = max(lengths)
    _lanes(ax, [f"answer {i + 1}" for i in range(len(lengths))], 0, longest * 1.32)
    colours, dark = _age_colours(steps - 1)
    for row, n in enumerate(lengths):
        y = len(lengths) - 1 - row
        pieces = _segments(n, budget)
        for j, (start, size) in enumerate(pieces):
            ax.add_patch(Rectangle((start, y - 0.3), size, 0.6, facecolor=colours[j], edgecolor=INK, lw=0.8))
            if size / longest >= 0.12:                   # a piece wide enough for its label
                ax.text(start + size / 2, y, _version(j), ha="center", va="center", fontsize=FONT,
                        color="white" if dark[j] else INK)
        last = len(pieces) - 1
        note = (f"trained at step {_update(last)}: token ages {last}…0" if last
                else "trained at step v: on-policy")
        ax.text(n + longest * 0.015, y, note, ha="left", va="center", fontsize=FONT)
    ax.set_title(f"Partial rollout, budget {budget} tokens per step: colour = the policy version that wrote "
                 "each piece", fontsize=FONT + 1)
    ax.set_xticks([0] + [n for n in range(budget, longest + 1, budget)] if longest // budget <= 12 else [0, longest])
    ax.tick_params(axis="x", labelsize=FONT)
    ax.set_xlabel("token position in the answer", fontsize=FONT)
    return fig


# --- 4: which tokens clipping silences -----------------------------------------------------------------------

def quadrants(c_low: float = 0.8, c_high: float = 1.2) -> Figure:
    """The four quadrants (sign of A) x (r below / above 1) of the clipped surrogate min(r·A, clip(r)·A)
    (BAPO Eq. 3; :func:`toy_rl.clipping.loss.clipped_mask`).

    Teaches: the min is pessimistic, so a token is clipped (no gradient) only once it has moved the way its
    advantage wants: A > 0 with r > c_high, or A < 0 with r < c_low. A good token that became less likely and a
    bad token that became more likely keep their gradient however far r goes. Grey: clipped.
    """
    if not (0 < c_low < 1 < c_high and math.isfinite(c_high)):
        raise ValueError(f"need 0 < c_low < 1 < c_high; got c_low={c_low!r}, c_high={c_high!r}")
    lo, hi = c_low / 2, c_high + 0.8 * (c_high - c_low) / 0.4       # default: r from 0.4 to 2.0
    fig, (ax,) = _figure()
    ax.set_xlim(lo, hi)
    ax.set_ylim(-1, 1)
    shade = dict(facecolor=CLIPPED, hatch="//", edgecolor="0.6", lw=0)
    ax.add_patch(Rectangle((c_high, 0), hi - c_high, 1, **shade))
    ax.add_patch(Rectangle((lo, -1), c_low - lo, 1, **shade))
    ax.axhline(0, color=INK, lw=1.2)
    ax.axvline(1, color=INK, lw=1.2)
    ax.axvline(c_high, 0.5, 1, color=INK, lw=0.9, ls="--")     # each bound matters on one side only
    ax.axvline(c_low, 0, 0.5, color=INK, lw=0.9, ls="--")
    say = dict(ha="center", va="center", fontsize=FONT)
    boxed = dict(say, bbox=dict(facecolor="white", edgecolor="none", pad=1.5))
    ax.text((lo + 1) / 2, 0.5, "A > 0, r < 1: became less likely\nkeeps gradient (pushes r up)", **say)
    ax.text((1 + c_high) / 2, 0.5, "keeps\ngradient", **say)
    ax.text((c_high + hi) / 2, 0.5, "A > 0, r > c_high\nclipped: no gradient", **boxed)
    ax.text((lo + c_low) / 2, -0.5, "A < 0, r < c_low\nclipped: no gradient", **boxed)
    ax.text((c_low + 1) / 2, -0.5, "keeps\ngradient", **say)
    ax.text((1 + hi) / 2, -0.5, "A < 0, r > 1: became more likely\nkeeps gradient (pushes r down)", **say)
    ax.set_xticks([c_low, 1, c_high], [f"c_low = {c_low:g}", "1", f"c_high = {c_high:g}"], fontsize=FONT)
    ax.set_yticks([0.5, -0.5], ["A > 0\n(good token)", "A < 0\n(bad token)"], fontsize=FONT)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("ratio r = π_θ / π_b", fontsize=FONT)
    ax.set_title("Which tokens keep their gradient under min(r·A, clip(r, c_low, c_high)·A): grey = clipped",
                 fontsize=FONT + 1)
    return fig


# --- 5: BAPO's search ------------------------------------------------------------------------------------------

def _as_array(name: str, x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or inf values")
    return a.reshape(-1)


def example_batch(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A small stale batch where negatives dominate: (ratio, adv), one entry per token, from a fixed seed.

    Failed answers are twice as long as correct ones (their tokens are two thirds of the batch, A < 0), and the
    policy has moved the way the advantages push: log r ~ N(+0.15, 0.3²) on positive tokens, N(-0.15, 0.3²) on
    negative ones. So ρ starts near 0.2 and BAPO's search has to move both bounds (it stops at [0.76, 3.0]).
    """
    rng = np.random.default_rng(seed)
    good = rng.random(n) < 1 / 3
    adv = np.where(good, rng.uniform(0.5, 1.5, n), -rng.uniform(0.5, 1.5, n))
    ratio = np.exp(rng.normal(0.0, 0.3, n) + np.where(good, 0.15, -0.15))
    return ratio, adv


def positive_share(ratio: np.ndarray, adv: np.ndarray, c_low: float, c_high: float) -> float:
    """ρ: the positives' share of the gradient-carrying mass |A|·r (BAPO's default reading, count="grad": A > 0
    with r <= c_high against A < 0 with r >= c_low; :mod:`toy_rl.clipping.balance`). 1 when nothing carries mass."""
    pos = float(np.sum(np.where((adv > 0) & (ratio <= c_high), adv * ratio, 0.0)))
    neg = float(np.sum(np.where((adv < 0) & (ratio >= c_low), -adv * ratio, 0.0)))
    return pos / (pos + neg) if pos + neg > 0 else 1.0


def search_path(ratio, adv, rho0: float = RHO0, low_range=LOW_RANGE, high_range=HIGH_RANGE,
                low_step: float = LOW_STEP, high_step: float = HIGH_STEP) -> list[tuple[float, float, float]]:
    """Algorithm 1 (paper, upper bound first) on one batch: every (c_low, c_high, ρ) the loop visits, in order;
    the last is where it stops (as :meth:`toy_rl.clipping.BAPO.search_loop` with the same settings)."""
    if not (isinstance(rho0, (int, float)) and 0 < rho0 < 1):
        raise ValueError(f"rho0 must lie in (0, 1): a share of the gradient-carrying mass; got {rho0!r}")
    ratio, adv = _as_array("ratio", ratio), _as_array("adv", adv)
    if ratio.shape != adv.shape:
        raise ValueError(f"ratio and adv must have the same shape; got {ratio.shape} and {adv.shape}")
    if np.any(ratio <= 0):
        raise ValueError("ratio must be > 0 (r = π_θ / π_b)")
    (a_lo, b_lo), (a_hi, b_hi) = low_range, high_range
    c_low, c_high = a_lo, a_hi
    path = [(c_low, c_high, positive_share(ratio, adv, c_low, c_high))]
    while path[-1][2] < rho0 and c_low + low_step <= b_lo + _TOL:
        if c_high + high_step <= b_hi + _TOL:
            c_high += high_step                          # raise the upper bound first, by δ1 ...
        else:
            c_low += low_step                            # ... then the lower one, by δ2
        path.append((c_low, c_high, positive_share(ratio, adv, c_low, c_high)))
    return path


def bapo_search_path(ratio=None, adv=None, rho0: float = RHO0) -> Figure:
    """BAPO's search (Algorithm 1, defaults of §5.1; ρ as the positive share of the gradient-carrying mass, Eq. 8
    read as the paper's text intends; docs/paper_vs_code.md) drawn on one batch.

    Teaches: the bounds the loop may visit do not depend on the data (left: c_high from a⁺ = 1.2 to b⁺ = 3.0
    in steps δ1 = 0.05, then c_low from a⁻ = 0.6 to b⁻ = 0.9 in steps δ2 = 0.02); only where it stops does
    (right: ρ at each step, stopping at the first ρ >= ρ0). ``ratio``, ``adv``: one entry per token (tensors or arrays of one
    shape; padding left out); default :func:`example_batch`. Blue: the points this batch's search visits.
    """
    if (ratio is None) != (adv is None):
        raise ValueError("pass both ratio and adv, or neither (the example batch)")
    if ratio is None:
        ratio, adv = example_batch()
    visited = search_path(ratio, adv, rho0)
    everything = _full_path()
    fig, (plane, trace) = _figure(2, widths=(1.6, 1))
    plane.plot([p[1] for p in everything], [p[0] for p in everything], ".", color=GRID, ms=4, label="may visit")
    plane.plot([p[1] for p in visited], [p[0] for p in visited], "o-", color=ACCENT, ms=3, lw=1.2,
               label="visited")
    lo, hi, rho = visited[-1]
    plane.plot([hi], [lo], "*", color=ACCENT, ms=13, mec=INK, mew=0.6)
    plane.annotate(f"start [{LOW_RANGE[0]:g}, {HIGH_RANGE[0]:g}]", (HIGH_RANGE[0], LOW_RANGE[0]),
                   (HIGH_RANGE[0] + 0.05, LOW_RANGE[0] + 0.03), fontsize=FONT)
    if lo > LOW_RANGE[0] + _TOL:               # stopped while raising c_low: label to the left of the point
        where = (hi - 0.95, lo + 0.05 if lo < 0.8 else lo - 0.1)
    else:                                      # stopped while raising c_high: label above the start's
        where = (min(hi - 0.3, 2.5), LOW_RANGE[0] + 0.1)
    plane.annotate(f"stop [{lo:.2f}, {hi:.2f}]", (hi, lo), where, fontsize=FONT,
                   arrowprops=dict(arrowstyle="-", color=INK, lw=0.7))
    plane.set_xlabel("c_high (raised first, by δ1)", fontsize=FONT)
    plane.set_ylabel("c_low (then, by δ2)", fontsize=FONT)
    plane.set_xlim(HIGH_RANGE[0] - 0.1, HIGH_RANGE[1] + 0.12)
    plane.set_ylim(LOW_RANGE[0] - 0.03, LOW_RANGE[1] + 0.05)
    plane.tick_params(labelsize=FONT)
    plane.legend(fontsize=FONT, loc="upper left", frameon=False)
    plane.set_title("BAPO's search path (Algorithm 1)", fontsize=FONT + 1)
    trace.plot(range(len(visited)), [p[2] for p in visited], "o-", color=ACCENT, ms=3, lw=1.2)
    trace.axhline(rho0, color=INK, ls="--", lw=0.9)
    rhos = [p[2] for p in visited]
    trace.set_ylim(min(rhos + [rho0]) - 0.03, max(rhos + [rho0]) + 0.06)
    trace.text(0, rho0 + 0.008, f"target ρ0 = {rho0:g}", va="bottom", ha="left", fontsize=FONT)
    trace.set_xlabel("search step", fontsize=FONT)
    trace.set_ylabel("ρ (positive share)", fontsize=FONT)
    trace.tick_params(labelsize=FONT)
    reached = "reached" if rho >= rho0 else "not reached: path ended"
    trace.set_title(f"ρ at each step: {rho:.3f}, {reached}", fontsize=FONT + 1)
    return fig


def _full_path() -> list[tuple[float, float]]:
    """Every (c_low, c_high) Algorithm 1 may visit with the default ranges and steps (data-free)."""
    (a_lo, b_lo), (a_hi, b_hi) = LOW_RANGE, HIGH_RANGE
    n_hi = int(math.floor((b_hi - a_hi) / HIGH_STEP + _TOL))
    n_lo = int(math.floor((b_lo - a_lo) / LOW_STEP + _TOL))
    return ([(a_lo, a_hi + i * HIGH_STEP) for i in range(n_hi + 1)]
            + [(a_lo + j * LOW_STEP, a_hi + n_hi * HIGH_STEP) for j in range(1, n_lo + 1)])
