"""Positive/negative loss mass and the balance ρ that BAPO steers (paper Eq. 8).

Notation: r = π_θ/π_behaviour per token, A the advantage, [c_low, c_high] the
ratio bounds. The paper, its text and the authors' code read ρ differently
(see ``docs/paper_vs_code.md``); two choices are exposed:

``count`` — which tokens make up the masses
    "all"  every token with its *clipped* value: positives weigh
           A·min(r, c_high), negatives |A|·max(r, c_low). This is Eq. 8 and
           the authors' ``_compute_effective_advantage``. Raising c_low can
           only *add* negative mass here.
    "grad" only tokens that still carry gradient under the clipped
           surrogate (not in :func:`~toy_rl.clipping.loss.clipped_mask`):
           positives with r ≤ c_high weigh A·r, negatives with
           r ≥ c_low weigh |A|·r. This is the paper's stated intent (raising
           c_low "filters" low-probability negatives out of the update).
           A token exactly at a bound keeps its gradient (torch's clamp
           passes it; the clip fractions count only r < c_low, r > c_high),
           so it counts here too: on-policy (r ≡ 1) with a range starting
           at 1, every token still counts.

Each token's contribution is multiplied by its weight: 1 (the mask) under
token-mean, 1/len(its sequence) under seq-mean-token-mean, as the loss
aggregation weighs it (:func:`toy_rl.clipping.loss.token_weights`).

``balance`` — how the masses become one number
    "share"    ρ = pos / (pos + neg)      (paper text, target ρ0 = 0.4)
    "pos_neg"  ρ = pos / neg              (authors' code, target 1.0;
               pos/neg = share / (1 − share))

Both masses depend on *one* bound each: pos on c_high only, neg on c_low
only. That is what lets BAPO's search be evaluated for every candidate bound
at once (:func:`pos_mass_at`, :func:`neg_mass_at`) with one pass over the
tokens and no host–device synchronisation.
"""
from __future__ import annotations

import torch

from .loss import clipped_mask

COUNTS = ("all", "grad")
BALANCES = ("share", "pos_neg")


def _binned_cumsum(bins: torch.Tensor, weights: torch.Tensor, n_bins: int, above: bool = False) -> torch.Tensor:
    """Per run (row), sum ``weights`` into bins by index, then cumulate: out[r, j] = Σ_{bins <= j},
    or with ``above`` Σ_{bins > j}, summed from the top (not total − Σ_{bins <= j}, whose rounding
    leaves ±1e-16 where the mass is exactly 0, e.g. every negative clipped).

    ``bins``/``weights`` are (runs, tokens); returns (runs, n_bins - 1). scatter_add: no sync on CUDA.
    """
    runs = bins.shape[0]
    offset = torch.arange(runs, device=bins.device)[:, None] * n_bins
    out = torch.zeros(runs * n_bins, dtype=weights.dtype, device=weights.device)
    out.scatter_add_(0, (bins + offset).reshape(-1), weights.reshape(-1))
    if above:
        return torch.cumsum(out.view(runs, n_bins).flip(1), 1).flip(1)[:, 1:]
    return torch.cumsum(out.view(runs, n_bins), 1)[:, :-1]


def pos_mass_at(ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                highs: torch.Tensor, count: str) -> torch.Tensor:
    """Positive mass for every candidate upper bound in ``highs`` (ascending, 1-D).

    ``ratio``, ``adv``, ``mask`` are (runs, tokens): each run (an independent update, e.g. one
    seed) gets its own masses. ``mask`` is 0/1, or per-token weights (each token's A·r counts
    times its weight; :func:`toy_rl.clipping.loss.token_weights`). Returns (runs, len(highs)).
    """
    a = torch.clamp(adv, min=0) * mask                   # only A > 0 counts
    idx = torch.bucketize(ratio, highs, right=False)     # #{h < r}; r <= highs[j] iff idx <= j
    m = highs.numel()
    below_ra = _binned_cumsum(idx, a * ratio, m + 1)      # Σ_{r<=h} A·r
    if count == "grad":
        return below_ra
    return below_ra + highs * _binned_cumsum(idx, a, m + 1, above=True)     # + h·Σ_{r>h} A


def neg_mass_at(ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                lows: torch.Tensor, count: str) -> torch.Tensor:
    """Negative mass (a positive number) for every candidate lower bound in ``lows``; (runs, len(lows))."""
    a = torch.clamp(-adv, min=0) * mask                  # |A| for A < 0
    idx = torch.bucketize(ratio, lows, right=True)       # #{l <= r}; r < lows[j] iff idx <= j
    m = lows.numel()
    above_ra = _binned_cumsum(idx, a * ratio, m + 1, above=True)    # Σ_{r>=l} |A|·r
    if count == "grad":
        return above_ra
    return above_ra + lows * _binned_cumsum(idx, a, m + 1)          # + l·Σ_{r<l} |A|


def balance_of(pos: torch.Tensor, neg: torch.Tensor, balance: str, eps: float = 0.0) -> torch.Tensor:
    """ρ from the masses: pos/(pos + neg + eps) ("share") or pos/(neg + eps) ("pos_neg"); ``eps`` is
    the authors' guard (their code: pos/(neg + 1e-8)), 0 by default. With nothing to balance
    (pos + neg = 0, or neg = 0) ρ = 1 ("share") or +inf ("pos_neg"), as in the authors' code."""
    if balance == "share":
        total = pos + neg
        return torch.where(total > 0, pos / (torch.where(total > 0, total, torch.ones_like(total)) + eps),
                           torch.ones_like(total))
    return torch.where(neg > 0, pos / (torch.where(neg > 0, neg, torch.ones_like(neg)) + eps),
                       torch.full_like(neg, float("inf")))


def mass_sums(ratio, adv, weights, c_low: float, c_high: float, count: str):
    """(pos, neg) at one pair of bounds, written out as plain masked sums (any shape; 0-d tensors).

    count="all" (Eq. 8): Σ A⁺·min(r, c_high) and Σ A⁻·max(r, c_low); count="grad": Σ |A|·r over
    the tokens :func:`~toy_rl.clipping.loss.clipped_mask` leaves alone. ``weights``: the 0/1 mask, or
    per-token weights (:func:`toy_rl.clipping.loss.token_weights`).
    Slow but plain: the binned sweeps above give the same numbers for every candidate bound at once.
    """
    a_pos, a_neg = torch.clamp(adv, min=0) * weights, torch.clamp(-adv, min=0) * weights
    if count == "grad":
        keep = ~clipped_mask(ratio, adv, c_low, c_high)
        return (a_pos * ratio * keep).sum(), (a_neg * ratio * keep).sum()
    return (a_pos * torch.clamp(ratio, max=c_high)).sum(), (a_neg * torch.clamp(ratio, min=c_low)).sum()


def masses(ratio, adv, mask, c_low: float, c_high: float, count: str):
    """(pos, neg) per run at one fixed pair of bounds; inputs (runs, tokens), outputs (runs,)."""
    like = dict(dtype=ratio.dtype, device=ratio.device)
    pos = pos_mass_at(ratio, adv, mask, torch.tensor([c_high], **like), count)[:, 0]
    neg = neg_mass_at(ratio, adv, mask, torch.tensor([c_low], **like), count)[:, 0]
    return pos, neg
