"""One update of the logits through the shared clipped loss.

The objective is the clipped surrogate of :func:`toy_rl.clipping.policy_loss_runs`
(BAPO Eq. 3; bounds from the rule, BAPO's from Algorithm 1), one run per seed.
For the bandit a "sequence" is one sampled token, so each (seeds, S, G) batch
goes in as (runs = seeds, batch = S·G, tokens = 1).

Vanilla policy gradient: autograd of the surrogate with respect to the logits,
    Δz = η · ∂J/∂z.
Natural policy gradient: for a softmax the Fisher matrix is F = diag(π) − ππᵀ,
and F⁺g = g/π + (a constant per context) — a constant that does not change
the policy, so
    Δz = η · (∂J/∂z) / π,
shifted so that E_π[Δz] = 0. This is the update the paper's Entropy-Clip Rule
(Eq. 6–7) is written for: its proof (App. B) drops the π factor of vanilla PG.
"""
from __future__ import annotations

import torch

from ..clipping import policy_loss_runs
from .policy import log_probs


def surrogate_gradient(logits: torch.Tensor, tokens: torch.Tensor, old_logp: torch.Tensor,
                       advantages: torch.Tensor, rule):
    """Gradient of the clipped surrogate J with respect to the logits, one run per seed.

    Args:
        logits: (seeds, S, K) the policy being trained.
        tokens: (seeds, S, G) sampled tokens.  old_logp: (seeds, S, G) their behaviour log-probs,
            recorded when they were sampled.  advantages: (seeds, S, G).
        rule: a clipping rule (Symmetric(), ClipHigher(), BAPO(), ...).

    J is the token-mean surrogate times S, i.e. the sum over contexts of each
    context's group mean, so η means the same step for every context whatever S is.

    Returns (grad_logits (seeds, S, K), grad_logp (seeds, S, G), stats): ``grad_logp``
    is ∂J/∂log π(a_i) per sample — 0 for clipped samples — which the quadrant
    decomposition splits ΔH with; ``stats`` is policy_loss_runs' dict of (seeds,) tensors.
    """
    n_seeds, S, G = tokens.shape
    z = logits.detach().requires_grad_(True)
    logp = log_probs(z).gather(-1, tokens)
    flat = lambda t: t.reshape(n_seeds, S * G, 1)
    mask = torch.ones_like(flat(old_logp))
    loss, stats = policy_loss_runs(flat(logp), flat(old_logp), flat(advantages), mask, rule)
    objective = -loss.sum() * S
    grad_logits, grad_logp = torch.autograd.grad(objective, (z, logp))
    return grad_logits, grad_logp, stats


def logit_step(grad_logits: torch.Tensor, pi: torch.Tensor, lr: float, pg: str = "vanilla") -> torch.Tensor:
    """Δz from the logit gradient: η·g (vanilla) or η·g/π centred so E_π[Δz] = 0 (natural)."""
    if pg == "vanilla":
        return lr * grad_logits
    if pg == "natural":
        tiny = torch.finfo(pi.dtype).tiny
        step = lr * grad_logits / pi.clamp(min=tiny)
        return step - (pi * step).sum(-1, keepdim=True)
    raise ValueError(f"pg must be 'vanilla' or 'natural'; got {pg!r}")
