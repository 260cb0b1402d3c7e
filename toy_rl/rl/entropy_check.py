"""The Entropy-Clip Rule on a transformer: measured next-token entropy change vs −Cov(log π, Δz).

For every answer position of a batch, take the full next-token distribution
π = softmax(z) before one clipped update and z + Δz after it. The exact change
H(z + Δz) − H(z) is compared with the first-order identity (Cui et al. 2025;
BAPO Eq. 6–7, App. B)

    ΔH ≈ −Cov_{a∼π}(log π(a), Δz_a)

where Δz is the *measured* logit change: in a network every token's gradient
moves every position's logits, so the tabular form A·X + C is not available,
but the identity still holds for whatever Δz the update produced.

The four quadrants (App. B.4) sort the trained positions by their sampled
token: probability above/below exp(E_π log π), advantage above/below the mean
advantage of the positions that kept their gradient; the measured ΔH is summed
per quadrant (high-p/high-A and low-p/low-A should lower entropy).
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from ..clipping import clipped_mask, policy_loss, token_ratio

QUADRANTS = ("high-p/high-A", "high-p/low-A", "low-p/high-A", "low-p/low-A")


def _entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = F.log_softmax(logits, -1)
    return -(logp.exp() * logp).sum(-1)


def _answer_logits(model, batch) -> torch.Tensor:
    """(B, N, V) next-token logits at every answer position (float64 for exact entropies)."""
    dev = model.device
    logits = model(batch.input_ids.to(dev), batch.attention_mask.to(dev))
    return logits[:, batch.start - 1:-1].double()


def entropy_rule_check(model, batch, rule, lr: float = 1e-3, agg: str = "token-mean") -> dict:
    """One plain gradient step (SGD, step size ``lr``) on a copy of ``model``; returns per-position arrays
    (``exact``, ``predicted``, ``quadrant``, ``clipped``) and the summary numbers: ``correlation``,
    ``sign_agreement`` (positions whose prediction is not ~0), ``median_rel_error``, and per quadrant
    the summed ΔH (``quadrant_dH``) and the share of its positions the rule clipped (``quadrant_clipped``).
    """
    if lr <= 0:
        raise ValueError(f"lr (η) must be > 0; got {lr}")
    model = copy.deepcopy(model).eval()
    mask = batch.response_mask.to(model.device) > 0
    with torch.no_grad():
        z0 = _answer_logits(model, batch)
    logits = model(batch.input_ids.to(model.device), batch.attention_mask.to(model.device))
    logp_all = F.log_softmax(logits[:, batch.start - 1:-1].float(), -1)
    answer = batch.input_ids[:, batch.start:].to(model.device)
    logp = logp_all.gather(-1, answer[..., None])[..., 0]
    old = batch.old_logp.to(model.device)
    adv = batch.advantages.to(model.device)
    loss, stats = policy_loss(logp, old, adv, mask.float(), rule, agg=agg)
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad
        z1 = _answer_logits(model, batch)

    log_pi = F.log_softmax(z0, -1)
    pi = log_pi.exp()
    dz = z1 - z0
    cov = (pi * (log_pi - (pi * log_pi).sum(-1, keepdim=True)) * (dz - (pi * dz).sum(-1, keepdim=True))).sum(-1)
    exact, predicted = (_entropy(z1) - _entropy(z0))[mask], (-cov)[mask]

    # quadrants of the sampled tokens, and whether the rule clipped them
    ratio = token_ratio(logp.detach().double(), old.double())
    a = adv.double()[:, None].expand_as(ratio)
    clipped = clipped_mask(ratio, a, stats["c_low"], stats["c_high"])
    keep = mask & ~clipped
    mean_a = a[keep].mean() if keep.any() else a[mask].mean()
    tok_logp = log_pi.gather(-1, answer[..., None])[..., 0]
    high_p = tok_logp > (pi * log_pi).sum(-1)
    high_a = a > mean_a + 1e-9 * a.abs().max()
    quadrant = (2 * (~high_p).long() + (~high_a).long())[mask]
    exact_np, pred_np, quad_np, clip_np = (t.cpu().numpy() for t in (exact, predicted, quadrant, clipped[mask]))
    return {"exact": exact_np, "predicted": pred_np, "quadrant": quad_np, "clipped": clip_np, "lr": lr,
            **agreement(exact_np, pred_np), **by_quadrant(exact_np, quad_np, clip_np), "stats": stats}


def agreement(exact: np.ndarray, predicted: np.ndarray, zero_tol: float = 1e-3) -> dict:
    """Correlation, sign agreement where |prediction| > zero_tol · max|prediction|, median relative error."""
    big = np.abs(predicted) > zero_tol * np.abs(predicted).max() if predicted.size else predicted.astype(bool)
    rel = np.abs(exact - predicted)[big] / np.abs(predicted)[big]
    corr = float(np.corrcoef(exact, predicted)[0, 1]) if exact.size > 1 and exact.std() > 0 else float("nan")
    return {"positions": int(exact.size), "correlation": corr,
            "sign_agreement": float(np.mean(np.sign(exact[big]) == np.sign(predicted[big]))) if big.any() else float("nan"),
            "median_rel_error": float(np.median(rel)) if big.any() else float("nan")}


def by_quadrant(exact: np.ndarray, quadrant: np.ndarray, clipped: np.ndarray) -> dict:
    dH = {q: float(exact[quadrant == i].sum()) for i, q in enumerate(QUADRANTS)}
    clip = {q: float(clipped[quadrant == i].mean()) if (quadrant == i).any() else float("nan")
            for i, q in enumerate(QUADRANTS)}
    count = {q: int((quadrant == i).sum()) for i, q in enumerate(QUADRANTS)}
    return {"quadrant_dH": dH, "quadrant_clipped": clip, "quadrant_count": count}


def error_slope(model, batch, rule, lrs=(1e-4, 3e-4, 1e-3, 3e-3)) -> float:
    """Log-log slope of the median |exact − predicted| against η: ≈ 2 for a first-order identity."""
    errs = [np.median(np.abs(r["exact"] - r["predicted"]))
            for r in (entropy_rule_check(model, batch, rule, lr) for lr in lrs)]
    if min(errs) <= 0:                  # no gradient (e.g. every advantage 0): nothing to fit
        return float("nan")
    return float(np.polyfit(np.log(lrs), np.log(errs), 1)[0])
