"""BAPO: adaptive clipping bounds searched for every update (arXiv 2510.18927, Algorithm 1).

Algorithm 1, with the paper's symbols::

    c_low ← a⁻ ; c_high ← a⁺                       # re-initialised every update
    while ρ < ρ0 and c_low + δ2 ≤ b⁻:
        if c_high + δ1 ≤ b⁺:  c_high ← c_high + δ1  # upper bound raised first
        else:                 c_low  ← c_low  + δ2

The bounds the loop visits do not depend on the data, only *where it stops*
does. So :meth:`BAPO.search` lays out the whole path of candidate bounds,
measures ρ at every point in one pass over the tokens (pos depends on c_high
only, neg on c_low only; see :mod:`toy_rl.clipping.balance`) and stops at the
first point with ρ ≥ ρ0, or at the end of the path. Same answer as the loop
(:meth:`BAPO.search_loop`, the loop written out), but no host–device
synchronisation per step (the authors' code calls ``.item()`` at every step).
The two halves are public: :meth:`BAPO.candidate_masses` (the masses at every
candidate bound, plain sums over tokens, so shards of a batch can be added up,
e.g. all-reduced over data-parallel ranks) and :meth:`BAPO.select` (the stop).

Defaults (paper §5.1): ρ0 = 0.4, [a⁻, b⁻] = [0.6, 0.9], [a⁺, b⁺] = [1.2, 3.0],
δ1 = 0.05 (upper), δ2 = 0.02 (lower), upper bound first, ρ as a share.

Default for *which tokens count* (``count``): "grad", the tokens that still
carry gradient. Why: the paper's argument for raising c_low is that it
"filters" low-probability negative tokens out of the update; that is true of
the gradient, and only a ρ over gradient-carrying tokens rises when c_low
rises. Under Eq. 8 as printed and the authors' code (``count="all"``) raising
c_low can only *lower* ρ, so the lower-bound half of Algorithm 1 never helps
and, whenever the upper half falls short, drives c_low to b⁻ regardless.
``BAPO.authors_code()`` reproduces the authors' code (docs/paper_vs_code.md) instead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .balance import BALANCES, COUNTS, balance_of, mass_sums, neg_mass_at, pos_mass_at
from .checks import check_search_inputs
from .rules import Bounds

ORDERS = ("upper_first", "lower_first")
MAX_PATH_POINTS = 10_000     # the search measures ρ at every point: (runs, points) numbers per update


def _steps(start: float, stop: float, step: float) -> int:
    """How many times `step` fits between start and stop (tolerant to 0.1 + 0.2 float noise)."""
    return int(math.floor((stop - start) / step + 1e-9))


def _capped_steps(start: float, stop: float, step: float) -> int:
    """How many times ``x = min(x + step, stop)`` runs from ``start`` until x reaches stop (the authors'
    loop; the last step may be short). Exact in exact arithmetic; float accumulation may add one."""
    return max(0, math.ceil((stop - start) / step - 1e-9))


@dataclass(frozen=True)
class BAPO:
    """Adaptive clipping: the bounds are searched until positives carry a share ρ0 of the loss.

    Args:
        rho0: target ρ0 (paper: 0.4 as a share; authors' code: pos/neg = 1.0).
        low_range: (a⁻, b⁻), where c_low starts and how far it may rise; within (0, 1].
        high_range: (a⁺, b⁺), where c_high starts and how far it may rise; ≥ 1.
        low_step: δ2, the lower bound's step.  high_step: δ1, the upper bound's step.
        order: "upper_first" (paper, Algorithm 1) or "lower_first" (authors' code:
            c_low to its maximum first, then c_high; each step capped at the maximum).
        count: "grad" (default, see module docstring) or "all" (Eq. 8, authors' code).
        balance: "share" pos/(pos+neg) (paper) or "pos_neg" pos/neg (authors' code).
        eps: added to the balance's denominator, pos/(neg + eps) (authors' code: 1e-8); 0 by default.
    """
    rho0: float = 0.4
    low_range: tuple = (0.6, 0.9)
    high_range: tuple = (1.2, 3.0)
    low_step: float = 0.02
    high_step: float = 0.05
    order: str = "upper_first"
    count: str = "grad"
    balance: str = "share"
    eps: float = 0.0

    name = "bapo"

    def __post_init__(self):
        for arg, allowed in (("order", ORDERS), ("count", COUNTS), ("balance", BALANCES)):
            if getattr(self, arg) not in allowed:
                raise ValueError(f"{arg} must be one of {allowed}; got {getattr(self, arg)!r}")
        if not isinstance(self.rho0, (int, float)):
            raise ValueError(f"rho0 must be a number; got {self.rho0!r}")
        if self.balance == "share" and not 0 < self.rho0 < 1:
            raise ValueError(f"rho0 must lie in (0, 1) when balance='share' (it is a share of the loss); got {self.rho0!r}")
        if self.balance == "pos_neg" and not (self.rho0 > 0 and math.isfinite(self.rho0)):
            raise ValueError(f"rho0 must be a finite number > 0 when balance='pos_neg'; got {self.rho0!r}")
        if not (isinstance(self.eps, (int, float)) and self.eps >= 0 and math.isfinite(self.eps)):
            raise ValueError(f"eps must be a finite number >= 0 (authors' code: 1e-8); got {self.eps!r}")
        for arg in ("low_range", "high_range"):
            rng = getattr(self, arg)
            if not isinstance(rng, (tuple, list)) or len(rng) != 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in rng):
                raise ValueError(f"{arg} must be a pair of finite numbers (start, max); got {rng!r}")
            if rng[0] > rng[1]:
                raise ValueError(f"{arg} is in the wrong order: start {rng[0]} > max {rng[1]}")
        (a_lo, b_lo), a_hi = self.low_range, self.high_range[0]
        if not (0 < a_lo and b_lo <= 1):
            raise ValueError(f"low_range must lie in (0, 1] (c_low clips ratios below 1); got {self.low_range!r}")
        if a_hi < 1:
            raise ValueError(f"high_range must lie at or above 1 (c_high clips ratios above 1); got {self.high_range!r}")
        for arg in ("low_step", "high_step"):
            v = getattr(self, arg)
            if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise ValueError(f"{arg} must be a number > 0; got {v!r}")
        n = self.path_size()
        if n > MAX_PATH_POINTS:
            raise ValueError(f"the search path would have {n:,} points (low_range {self.low_range} in steps of "
                             f"{self.low_step}, high_range {self.high_range} in steps of {self.high_step}); at most "
                             f"{MAX_PATH_POINTS:,} are allowed: use larger steps or narrower ranges")

    @classmethod
    def paper(cls) -> "BAPO":
        """Algorithm 1 with the §5.1 defaults (the same as ``BAPO()``)."""
        return cls()

    @classmethod
    def authors_code(cls) -> "BAPO":
        """The authors' verl recipe (shipped yaml): lower bound first, pos/neg target 1.0,
        all tokens with clipped values, [0.6, 0.8] and [1.2, 2.0] in steps of 0.05, pos/(neg + 1e-8).
        Their loss also uses dual-clip c = 3.0 and token-mean: pass
        ``dual_clip=3.0, agg="token-mean"`` to ``policy_loss`` for the full setting."""
        return cls(rho0=1.0, low_range=(0.6, 0.8), high_range=(1.2, 2.0), low_step=0.05,
                   high_step=0.05, order="lower_first", count="all", balance="pos_neg", eps=1e-8)

    def path_size(self) -> int:
        """How many points :meth:`path` lays out, counted without building it (lower_first: float
        accumulation may add one)."""
        (a_lo, b_lo), (a_hi, b_hi) = self.low_range, self.high_range
        if self.order == "upper_first":
            n_lo = _steps(a_lo, b_lo, self.low_step)
            return 1 if n_lo == 0 else 1 + _steps(a_hi, b_hi, self.high_step) + n_lo
        return 1 + _capped_steps(a_lo, b_lo, self.low_step) + _capped_steps(a_hi, b_hi, self.high_step)

    def path(self) -> list[tuple[float, float]]:
        """Every (c_low, c_high) the search may visit, in order; it stops at the first with ρ ≥ ρ0.

        upper_first (Algorithm 1): a⁺ + i·δ1, then a⁻ + j·δ2, rounded to 10 decimals (no drift
        from adding steps). lower_first: the authors' ``min(cur + step, max)``, accumulated as their
        loop does (floats like 1.5000000000000002 kept, not rounded).
        """
        (a_lo, b_lo), (a_hi, b_hi) = self.low_range, self.high_range
        pts = [(a_lo, a_hi)]
        if self.order == "upper_first":                       # Algorithm 1
            n_lo = _steps(a_lo, b_lo, self.low_step)
            if n_lo == 0:                                     # loop guard c_low + δ2 ≤ b⁻ fails at once
                return pts
            n_hi = _steps(a_hi, b_hi, self.high_step)
            pts += [(a_lo, a_hi + i * self.high_step) for i in range(1, n_hi + 1)]
            top = pts[-1][1]
            pts += [(a_lo + j * self.low_step, top) for j in range(1, n_lo + 1)]
            return [(round(lo, 10), round(hi, 10)) for lo, hi in pts]
        lo = a_lo                                             # authors' code: min(cur + step, max)
        while lo < b_lo:
            lo = min(lo + self.low_step, b_lo)
            pts.append((lo, a_hi))
        hi = a_hi
        while hi < b_hi:
            hi = min(hi + self.high_step, b_hi)
            pts.append((lo, hi))
        return pts

    def _grid(self):
        """The path's distinct lower and upper bounds (ascending) and, per path point, their indices."""
        pts = self.path()
        lows = sorted({lo for lo, _ in pts})
        highs = sorted({hi for _, hi in pts})
        lo_at, hi_at = {lo: i for i, lo in enumerate(lows)}, {hi: i for i, hi in enumerate(highs)}
        return lows, highs, [lo_at[lo] for lo, _ in pts], [hi_at[hi] for _, hi in pts]

    def candidate_masses(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                         weights=None) -> tuple[torch.Tensor, torch.Tensor]:
        """The first half of :meth:`search`: the masses (Eq. 8, read as ``count`` says) at every
        candidate bound, in one pass over the tokens.

        Returns ``(pos_at, neg_at)``: ``pos_at`` (runs, H) is the positive mass at each distinct
        c_high of :meth:`path` (ascending), ``neg_at`` (runs, L) the negative mass at each distinct
        c_low. Both are plain sums over tokens, so the masses of a batch split into shards (e.g. one
        per data-parallel rank) are the sums of the shards' masses: add them up (``all_reduce``) and
        pass the totals to :meth:`select` to get the bounds of the whole batch.
        """
        lows, highs, _, _ = self._grid()
        like = dict(dtype=ratio.dtype, device=ratio.device)
        w = mask if weights is None else weights
        return (pos_mass_at(ratio, adv, w, torch.tensor(highs, **like), self.count),
                neg_mass_at(ratio, adv, w, torch.tensor(lows, **like), self.count))

    def select(self, pos_at: torch.Tensor, neg_at: torch.Tensor) -> dict:
        """The second half of :meth:`search`: Algorithm 1's stopping point from the masses at every
        candidate bound (:meth:`candidate_masses`, possibly summed over shards). Same return as :meth:`search`."""
        lows, highs, lo_list, hi_list = self._grid()
        like = dict(dtype=pos_at.dtype, device=pos_at.device)
        lo_idx = torch.tensor(lo_list, device=pos_at.device)
        hi_idx = torch.tensor(hi_list, device=pos_at.device)
        path_low, path_high = torch.tensor(lows, **like)[lo_idx], torch.tensor(highs, **like)[hi_idx]
        pos_path, neg_path = pos_at[:, hi_idx], neg_at[:, lo_idx]
        rho_path = balance_of(pos_path, neg_path, self.balance, self.eps)
        ok = rho_path >= self.rho0                                   # (runs, P)
        first_ok = torch.argmax(ok.to(torch.int32), dim=1)           # first True (0 if none)
        stop = torch.where(ok.any(1), first_ok, torch.full_like(first_ok, len(lo_list) - 1))
        pick = lambda t: t.gather(1, stop[:, None])[:, 0]
        return dict(path_low=path_low, path_high=path_high, rho_path=rho_path, stop=stop,
                    c_low=path_low[stop], c_high=path_high[stop], pos=pick(pos_path), neg=pick(neg_path))

    def search(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, weights=None) -> dict:
        """Run Algorithm 1 for each run (row) of (runs, tokens) inputs, vectorised.

        ``weights``: per-token weights of the masses (default: the mask); policy_loss passes the
        aggregation's (:func:`toy_rl.clipping.loss.token_weights`), so ρ is the share of the loss optimised.

        Returns tensors on the batch's device: ``path_low``, ``path_high`` (P,)
        — every point the loop may visit; ``rho_path`` (runs, P) — ρ at each;
        ``stop`` (runs,) — where the loop stops; ``c_low``, ``c_high``, ``pos``,
        ``neg`` (runs,) — the bounds chosen and the masses there.
        (:meth:`candidate_masses` then :meth:`select`, the two halves, for masses summed over shards.)
        NaN or inf inputs, or a run without a token, are a ValueError, as in :func:`~toy_rl.clipping.policy_loss`.
        """
        check_search_inputs(ratio, adv, mask, weights)
        return self.select(*self.candidate_masses(ratio, adv, mask, weights))

    def search_loop(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                    weights=None) -> tuple[float, float, float]:
        """Algorithm 1 as a plain loop, for one update: 1-D or (1, tokens) inputs. Returns (c_low, c_high, ρ).

        A pass over the tokens per step, ρ from plain masked sums (:func:`~toy_rl.clipping.balance.mass_sums`,
        tokens weighted by ``weights`` as in :meth:`search`): slow, but it reads like the paper.
        :meth:`search` gives the same bounds for many runs at once (up to float drift: here the
        steps are added one by one, as the paper and the authors' code do).
        """
        if ratio.dim() > 1 and ratio.shape[0] != 1:
            raise ValueError(f"search_loop runs one update: 1-D or (1, tokens) inputs; got {tuple(ratio.shape)} "
                             "(search()/bounds() take several runs)")
        w = mask if weights is None else weights

        def rho(c_low, c_high):
            return float(balance_of(*mass_sums(ratio, adv, w, c_low, c_high, self.count), self.balance, self.eps))

        (a_lo, b_lo), (a_hi, b_hi) = self.low_range, self.high_range     # [a⁻, b⁻], [a⁺, b⁺]
        d1, d2 = self.high_step, self.low_step                           # δ1 (upper), δ2 (lower)
        tol = 1e-9                                                       # float noise: 0.6 + 15 × 0.02 ≈ 0.9
        c_low, c_high = a_lo, a_hi                                       # c_low ← a⁻; c_high ← a⁺
        if self.order == "upper_first":                                  # Algorithm 1:
            while rho(c_low, c_high) < self.rho0 and c_low + d2 <= b_lo + tol:  # while ρ < ρ0 and c_low + δ2 ≤ b⁻
                if c_high + d1 <= b_hi + tol:                            #   if c_high + δ1 ≤ b⁺:
                    c_high += d1                                         #     c_high ← c_high + δ1
                else:
                    c_low += d2                                          #   else: c_low ← c_low + δ2
        else:                                                            # authors' code: c_low first, capped
            while rho(c_low, c_high) < self.rho0 and c_low < b_lo:
                c_low = min(c_low + d2, b_lo)
            while rho(c_low, c_high) < self.rho0 and c_high < b_hi:
                c_high = min(c_high + d1, b_hi)
        return c_low, c_high, rho(c_low, c_high)

    def bounds(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, weights=None) -> Bounds:
        """Bounds for each run; ``ratio``, ``adv``, ``mask`` and ``weights`` (see :meth:`search`) are (runs, tokens)."""
        return self.bounds_from_search(self.search(ratio, adv, mask, weights))

    def bounds_from_search(self, s: dict) -> Bounds:
        """:class:`Bounds` from a :meth:`search` (or :meth:`select`) result."""
        rho = s["rho_path"].gather(1, s["stop"][:, None])[:, 0]
        extra = dict(rho_before=s["rho_path"][:, 0], search_steps=s["stop"].to(rho.dtype),
                     rho_target=torch.full_like(rho, self.rho0), rho_reached=(rho >= self.rho0).to(rho.dtype))
        return Bounds(s["c_low"], s["c_high"], s["pos"], s["neg"], rho, extra)
