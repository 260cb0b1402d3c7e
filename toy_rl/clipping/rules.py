"""The fixed clipping rules: symmetric PPO/GRPO clipping and DAPO's clip-higher.

Every rule hands :func:`toy_rl.clipping.policy_loss` a pair of *ratio bounds*
[c_low, c_high] for the surrogate min(r·A, clip(r, c_low, c_high)·A)
(BAPO Eq. 3; docs/paper_vs_code.md, "Objective"). The user-facing names of the fixed rules are
epsilons, as in TRL (``epsilon``, ``epsilon_high``) and verl
(``clip_ratio_low/high``): c_low = 1 − eps_low, c_high = 1 + eps_high.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

import torch

from .balance import balance_of, masses


class Bounds(NamedTuple):
    """What a rule decided for each run's update: tensors shaped (runs,), still on the device.

    ``pos``/``neg``/``rho`` are the loss masses and the balance at the chosen
    bounds, measured the way the rule's ``count``/``balance`` say
    (see :mod:`toy_rl.clipping.balance`). ``extra`` holds rule-specific numbers
    (BAPO: ρ before the search, search steps, target, whether it was reached).
    """
    c_low: torch.Tensor
    c_high: torch.Tensor
    pos: torch.Tensor
    neg: torch.Tensor
    rho: torch.Tensor
    extra: dict


def _check_epsilon(name: str, value: float, upper: float | None = None) -> None:
    if not (isinstance(value, (int, float)) and value > 0 and (upper is None or value < upper)):
        side = f"in (0, {upper})" if upper is not None else "> 0"
        raise ValueError(f"{name} must be a number {side} (bounds are 1 - eps_low < 1 < 1 + eps_high); got {value!r}")


@runtime_checkable
class ClippingRule(Protocol):
    """What :func:`toy_rl.clipping.policy_loss` needs of a rule: ``Symmetric()``, ``ClipHigher()``,
    ``BAPO()``, ``FixedBounds(lo, hi)``, or your own.

    ``name``: a short label. ``bounds(ratio, adv, mask)``: ``ratio``, ``adv``, ``mask`` are
    (runs, tokens), one row per independent update; return each run's [c_low, c_high] with the
    masses and ρ measured there, as :class:`Bounds`. A rule may also accept ``weights=`` (per-token
    weights of the loss aggregation, see :func:`toy_rl.clipping.loss.token_weights`): policy_loss
    passes them, when they differ from the mask, only to rules whose ``bounds`` has that argument.
    """
    name: str

    def bounds(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> Bounds: ...


class _Fixed:
    """Shared by the fixed rules: the bounds are the properties ``c_low``/``c_high``, whatever the batch.

    ρ is reported (not steered) over gradient-carrying tokens as a share,
    the same reading as BAPO's default, so the rules are comparable.
    """
    count = "grad"
    balance = "share"

    @property
    def name(self) -> str:
        return type(self).__name__.lower()

    def bounds(self, ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, weights=None) -> Bounds:
        """Bounds for each run; ``ratio``, ``adv``, ``mask`` are (runs, tokens). The masses weigh tokens
        by ``weights`` (default: the mask; see :func:`toy_rl.clipping.loss.token_weights`)."""
        pos, neg = masses(ratio, adv, mask if weights is None else weights, self.c_low, self.c_high, self.count)
        return Bounds(torch.full_like(pos, self.c_low), torch.full_like(pos, self.c_high),
                      pos, neg, balance_of(pos, neg, self.balance), {})


def has_fixed_bounds(rule) -> bool:
    """Whether ``rule``'s bounds are the same whatever the batch (symmetric, clip-higher, fixed bounds; not BAPO,
    and not a rule of your own unless it subclasses one of these)."""
    return isinstance(rule, _Fixed)


@dataclass(frozen=True)
class FixedRule(_Fixed):
    """Clip to the fixed ratio bounds [1 − eps_low, 1 + eps_high]."""
    eps_low: float = 0.2
    eps_high: float = 0.2

    def __post_init__(self):
        _check_epsilon("eps_low", self.eps_low, upper=1.0)
        _check_epsilon("eps_high", self.eps_high)

    @property
    def c_low(self) -> float:
        return 1.0 - self.eps_low

    @property
    def c_high(self) -> float:
        return 1.0 + self.eps_high


class Symmetric(FixedRule):
    """PPO/GRPO clipping: [1 − eps, 1 + eps], eps = 0.2 by default."""

    def __init__(self, eps: float = 0.2):
        _check_epsilon("eps", eps, upper=1.0)
        super().__init__(eps_low=eps, eps_high=eps)

    def __repr__(self):
        return f"Symmetric(eps={self.eps_low})"


class ClipHigher(FixedRule):
    """DAPO's clip-higher: [1 − eps_low, 1 + eps_high], defaults 0.2 and 0.28 (DAPO §3.1)."""

    def __init__(self, eps_low: float = 0.2, eps_high: float = 0.28):
        super().__init__(eps_low=eps_low, eps_high=eps_high)

    @property
    def name(self) -> str:
        return "clip-higher"

    def __repr__(self):
        return f"ClipHigher(eps_low={self.eps_low}, eps_high={self.eps_high})"


@dataclass(frozen=True)
class FixedBounds(_Fixed):
    """Explicit ratio bounds [lo, hi] (0 < lo ≤ 1 ≤ hi), e.g. the bounds BAPO chose for a whole
    batch, reused for each of its micro-batches so that the search stays per update (Algorithm 1)."""
    lo: float = 0.8
    hi: float = 1.2

    def __post_init__(self):
        lo, hi = self.lo, self.hi
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float))):
            raise ValueError(f"lo and hi must be numbers; got lo={lo!r}, hi={hi!r}")
        if lo > hi:
            raise ValueError(f"lo {lo} > hi {hi}: the bounds are in the wrong order "
                             "(bounds must satisfy 0 < lo <= 1 <= hi)")
        if not 0 < lo <= 1 <= hi:
            raise ValueError(f"bounds must satisfy 0 < lo <= 1 <= hi; got lo={lo!r}, hi={hi!r}")

    @property
    def c_low(self) -> float:
        return float(self.lo)

    @property
    def c_high(self) -> float:
        return float(self.hi)

    @property
    def name(self) -> str:
        return "fixed-bounds"
