"""Which tokens raised entropy and which lowered it: the four quadrants of BAPO App. B.4.

First order, for any logit step Δz (Cui et al. 2025, arXiv 2505.22617):
    ΔH ≈ −Cov_{a∼π}(log π(a), Δz_a).
Δz is a sum over the tokens that carry gradient: a token a whose surrogate has
derivative w = ∂J/∂log π(a) moves the logits by η·w·(e_a − π) (vanilla PG) or
η·w·(e_a − π)/π (natural PG). Its own share of ΔH is therefore, with L = log π
and m = E_π[L] = −H:

    natural PG:  −η·w·(L_a − m)
    vanilla PG:  −η·w·(π_a·(L_a − m) − Cov_π(L, π))

and the shares add up to −Cov(L, Δz) exactly. Clipped tokens have w = 0 and no share.

Quadrants (App. B.4): "high probability" means π(a) > exp(E_π[log π]), i.e. L_a > m;
"high advantage" means A above its mean over the retained (unclipped) tokens.
Under natural PG, high-p/high-A and low-p/low-A tokens lower the entropy, the
other two raise it (the vanilla-PG shares mostly agree; the Cov(L, π) term can flip small ones).
"""
from __future__ import annotations

import torch

QUADRANTS = ("high_p_high_A", "high_p_low_A", "low_p_high_A", "low_p_low_A")
LOWERS_ENTROPY = {"high_p_high_A": True, "high_p_low_A": False, "low_p_high_A": False, "low_p_low_A": True}


def entropy_shares(log_pi: torch.Tensor, tokens: torch.Tensor, weight: torch.Tensor,
                   lr: float, pg: str = "vanilla") -> torch.Tensor:
    """First-order ΔH caused by each token's gradient (see module docstring).

    Args:
        log_pi: (..., K) log π of the policy being updated.
        tokens: (..., n) which token each item is (sampled tokens, or arange(K) for the tabular case).
        weight: (..., n) w = ∂J/∂log π(a) of each item (0 for clipped ones).
        lr: η.  pg: "vanilla" or "natural".

    Returns (..., n); summed over the last dimension it is −Cov_π(L, Δz) per context.
    """
    pi = log_pi.exp()
    m = (pi * log_pi).sum(-1, keepdim=True)                       # E_π[log π] = −H
    centred = log_pi.gather(-1, tokens) - m                        # L_a − m
    if pg == "natural":
        return -lr * weight * centred
    cov_l_pi = (pi * (log_pi - m) * pi).sum(-1, keepdim=True)      # Cov_π(L, π)
    return -lr * weight * (pi.gather(-1, tokens) * centred - cov_l_pi)


def quadrant_of(log_pi: torch.Tensor, tokens: torch.Tensor, advantages: torch.Tensor,
                retained: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Quadrant index 0..3 (order of QUADRANTS) of each item, shaped like ``tokens`` (..., n).

    The advantage threshold is the (``weight``-weighted) mean of A over the retained items of the
    same context (all items when none is retained). An advantage equal to that mean (up to
    rounding) counts as low.
    """
    pi = log_pi.exp()
    m = (pi * log_pi).sum(-1, keepdim=True)
    high_p = log_pi.gather(-1, tokens) > m
    w = torch.ones_like(advantages) if weight is None else weight
    keep = w * retained.to(w.dtype)
    mean_kept = (keep * advantages).sum(-1, keepdim=True) / keep.sum(-1, keepdim=True).clamp(min=1e-300)
    mean_all = (w * advantages).sum(-1, keepdim=True) / w.sum(-1, keepdim=True)
    threshold = torch.where(keep.sum(-1, keepdim=True) > 0, mean_kept, mean_all)
    tol = 1e-9 * advantages.abs().amax(-1, keepdim=True)      # A equal to the mean counts as low,
    high_a = advantages > threshold + tol                      # whatever the rounding of the mean
    return 2 * (~high_p).long() + (~high_a).long()


def split_by_quadrant(quadrant: torch.Tensor, shares: torch.Tensor, clipped: torch.Tensor,
                      weight: torch.Tensor | None = None) -> dict:
    """Sum items into the four quadrants, per run.

    Inputs are (runs, n) (flatten contexts into n beforehand); ``weight`` counts items
    (default 1 each; the tabular case passes π_behaviour). Returns (runs, 4) tensors:
    ``dH`` — first-order entropy change caused by each quadrant; ``share`` — the
    quadrant's share of the items; ``clip_frac`` — the share of the quadrant's items
    that were clipped (NaN where the quadrant is empty).
    """
    w = torch.ones_like(shares) if weight is None else weight
    onehot = torch.nn.functional.one_hot(quadrant, 4).to(shares.dtype)          # (runs, n, 4)
    total = (onehot * w[..., None]).sum(1)
    cut = (onehot * (w * clipped.to(w.dtype))[..., None]).sum(1)
    return dict(dH=(onehot * shares[..., None]).sum(1),
                share=total / total.sum(-1, keepdim=True),
                clip_frac=torch.where(total > 0, cut / total.clamp(min=1e-300), torch.full_like(total, float("nan"))))
