"""One update of the logits through the shared clipped loss.

The objective is the clipped surrogate of :func:`toy_rl.clipping.policy_loss_runs`
(BAPO Eq. 3; bounds from the rule, BAPO's from Algorithm 1), one run per seed.
For the bandit a "sequence" is one answer, so each (seeds, S, G) batch goes in
as (runs = seeds, batch = S·G, tokens = T): T = 1 for one-token answers, the
longest answer otherwise, with a mask (see :mod:`toy_rl.bandit.answers`).

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
from .answers import BanditBatch, answer_tokens
from .policy import log_probs


def surrogate_gradient(logits: torch.Tensor, batch: BanditBatch, rule, cont_logits: torch.Tensor | None = None,
                       dual_clip: float | None = None):
    """Gradient of the clipped surrogate J with respect to the logits, one run per seed.

    Args:
        logits: (seeds, S, K) the decision policy being trained.
        batch: a :class:`~toy_rl.bandit.answers.BanditBatch` (tokens, behaviour log-probs recorded when
            they were sampled, advantages; continuation tokens for multi-token answers).
        rule: a clipping rule (Symmetric(), ClipHigher(), BAPO(), ...).
        cont_logits: (seeds, S, K) the continuation policy (multi-token answers only).
        dual_clip: c > 1 caps the loss of A < 0 tokens at c·|A| (dual-clip, max(·, c·A)); None: off.

    J is the token-mean surrogate times S; with one-token answers that is the sum over contexts of
    each context's group mean, so η means the same step for every context whatever S is. With
    longer answers every token of every answer counts once (a long wrong answer weighs more).

    Returns ``(grad_logits, grad_cont, grad_logp, stats, tokens)``: ``grad_cont`` (None for one-token
    batches) the continuation's logit gradient; ``grad_logp`` (seeds, S, G) is ∂J/∂log π(a_i) per
    decision token — 0 for clipped ones — which the quadrant decomposition splits ΔH with; ``stats``
    is policy_loss_runs' dict of (seeds,) tensors (over all answer tokens); ``tokens`` the detached
    loss inputs (logp, old_logp, advantages, mask) of :func:`~toy_rl.bandit.answers.answer_tokens`.
    """
    S = batch.tokens.shape[1]
    multi = batch.lengths is not None
    z = logits.detach().requires_grad_(True)
    w = cont_logits.detach().requires_grad_(True) if multi else None
    logp = log_probs(z).gather(-1, batch.tokens)
    flat_logp, old, adv, mask = answer_tokens(logp, w, batch)
    loss, stats = policy_loss_runs(flat_logp, old, adv, mask, rule, dual_clip=dual_clip)
    objective = -loss.sum() * S
    if multi:
        grad_logits, grad_cont, grad_logp = torch.autograd.grad(objective, (z, w, logp))
    else:
        (grad_logits, grad_logp), grad_cont = torch.autograd.grad(objective, (z, logp)), None
    return grad_logits, grad_cont, grad_logp, stats, (flat_logp.detach(), old, adv, mask)


def logit_step(grad_logits: torch.Tensor, pi: torch.Tensor, lr: float, pg: str = "vanilla") -> torch.Tensor:
    """Δz from the logit gradient: η·g (vanilla) or η·g/π centred so E_π[Δz] = 0 (natural)."""
    if pg == "vanilla":
        return lr * grad_logits
    if pg == "natural":
        tiny = torch.finfo(pi.dtype).tiny
        step = lr * grad_logits / pi.clamp(min=tiny)
        return step - (pi * step).sum(-1, keepdim=True)
    raise ValueError(f"pg must be 'vanilla' or 'natural'; got {pg!r}")
