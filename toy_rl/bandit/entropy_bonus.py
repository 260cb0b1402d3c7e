"""An entropy bonus for the bandit's logits, fixed or adaptive (the knob huggingface/trl#3320 asked for).

The objective of one update becomes J(z) + β·Σ_s H(π_s), H the exact entropy of context s's softmax (what an
LM's per-token entropy term is at each position). Its gradient, for π = softmax(z):

    ∂H/∂z_a = −π_a·(log π_a + H)                                            (1)

(from ∂π_b/∂z_a = π_b(δ_ab − π_a)); it sums to zero over a, so it never moves the softmax's total, and it
pushes every token towards the mean log-probability: likely tokens down, unlikely ones up.

β fixed (``coef``), or adaptive (``target`` set): the rule TRL's GRPOTrainer added for #3320 (PR #6140,
after Skywork-OR1's adaptive entropy control): after every update β grows by ``delta`` while the policy's
entropy is below ``target`` and shrinks by ``delta`` otherwise, within [0, ``coef_max``], and the bonus is
applied only while the entropy is at or below the target.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .policy import log_probs


def entropy_gradient(logits: torch.Tensor) -> torch.Tensor:
    """∂H/∂z of the softmax entropy, Eq. (1) above; same shape as ``logits`` (..., K)."""
    logp = log_probs(logits)
    pi = logp.exp()
    H = -(pi * logp).sum(-1, keepdim=True)
    return -pi * (logp + H)


@dataclass(frozen=True)
class EntropyBonus:
    """β·H added to the objective: fixed β = ``coef``, or adaptive towards ``target`` nats (see module docstring)."""
    coef: float = 0.0
    target: float | None = None
    delta: float = 0.0
    coef_max: float = 1.0

    def __post_init__(self):
        for name in ("coef", "delta", "coef_max"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"{name} must be a number >= 0; got {v!r}")
        if self.target is not None and not (isinstance(self.target, (int, float)) and self.target > 0):
            raise ValueError(f"target must be None or a number > 0 (nats); got {self.target!r}")

    @property
    def adaptive(self) -> bool:
        return self.target is not None

    def label(self) -> str:
        if self.adaptive:
            return f"adaptive entropy → {self.target:g} nats"
        return f"entropy bonus β = {self.coef:g}" if self.coef else "no entropy bonus"

    def applied(self, coef: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
        """The β each run uses this update ((runs,) tensors): ``coef``, or 0 where an adaptive bonus's
        entropy ``H`` is above its target."""
        if not self.adaptive:
            return coef
        return torch.where(H <= self.target, coef, torch.zeros_like(coef))

    def next_coef(self, coef: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
        """β for the next update: unchanged if fixed; ± ``delta`` (below / above the target), clamped, if adaptive."""
        if not self.adaptive:
            return coef
        return (coef + torch.where(H < self.target, self.delta, -self.delta)).clamp(0.0, self.coef_max)

    def gradient(self, logits: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
        """β·∂(Σ_s H_s)/∂z for logits (runs, S, K) with β per run ``coef`` (runs,)."""
        return coef[:, None, None] * entropy_gradient(logits)

