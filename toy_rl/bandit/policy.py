"""A tabular softmax policy: one logit per token, π = softmax(z), and its exact statistics.

Shapes: logits are (..., K) — in the simulator (seeds, S, K): S contexts
(independent "prompts"), K tokens each. Every quantity here is exact (a sum
over the K tokens), not estimated from samples.
"""
from __future__ import annotations

import torch


def log_probs(logits: torch.Tensor) -> torch.Tensor:
    """log π(a) for every token a; same shape as ``logits``."""
    return torch.log_softmax(logits, dim=-1)


def probs(logits: torch.Tensor) -> torch.Tensor:
    """π(a) for every token a; same shape as ``logits``."""
    return torch.softmax(logits, dim=-1)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Exact entropy H(π) = −Σ_a π(a) log π(a) in nats, one per context: (..., K) -> (...)."""
    logp = log_probs(logits)
    return -(logp.exp() * logp).sum(-1)


def expected_reward(logits: torch.Tensor, reward_mean: torch.Tensor) -> torch.Tensor:
    """Exact E_{a∼π}[R(a)] = Σ_a π(a)·r̄(a), one per context; ``reward_mean`` broadcasts against ``logits``."""
    return (probs(logits) * reward_mean).sum(-1)


def sample_tokens(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Draw tokens by inverting the CDF: a = the first token with cdf(a) > u.

    ``logits`` (..., K), ``u`` (..., G) uniforms in [0, 1) (see :mod:`.rng`); returns (..., G) int64.
    """
    cdf = probs(logits).cumsum(-1).contiguous()
    idx = torch.searchsorted(cdf, u.contiguous(), right=True)
    return idx.clamp(max=logits.shape[-1] - 1)     # u above a cdf that rounds to 0.9999… -> last token


def best_prob(logits: torch.Tensor, correct: torch.Tensor) -> torch.Tensor:
    """Exact probability of the best tokens (``correct``, a (..., K) bool mask), one per context: (..., K) -> (...)."""
    return (probs(logits) * correct.to(logits.dtype)).sum(-1)


def best_found(logits: torch.Tensor, correct: torch.Tensor, threshold: float = 0.5) -> torch.Tensor:
    """Share of contexts whose best tokens together hold more than ``threshold`` of π: (seeds, S, K) -> (seeds,).

    "The best answer was found": the policy puts most of its mass on it. In the "trap" preset a run
    that settled on the trap token scores 0 in that context, one that escaped to a reward-1 token 1.
    """
    return (best_prob(logits, correct) > threshold).to(logits.dtype).mean(-1)
