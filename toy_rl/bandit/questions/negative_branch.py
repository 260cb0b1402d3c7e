"""Question 4, the unbounded negative branch on stale data, and dual-clip (the question of
huggingface/trl#6945 as this project's issue cites it; the thread itself could not be read here, see the
notebook). TRL#3435 asked for the same cap ("two-sided clipping", δ).

For A < 0 the surrogate min(r·A, clip(r, c_low, c_high)·A) (BAPO Eq. 3) takes the unclipped branch r·A for
every r > c_high: its gradient weight ∂/∂log π = r·A grows with r without bound, so one negative token whose
probability has grown far since sampling (stale data, a low-probability token) can outweigh the rest of the
batch. Positive tokens cannot do that: above c_high they are clipped, below c_low their weight is under c_low·A.
Dual-clip (Ye et al. 2020; verl's ``clip_ratio_c``, 3 there) caps the negative branch: max(surrogate, c·A)
for A < 0, flat (no gradient) beyond r = c. TRL's δ, min(min(r, δ)·A, clip(r)·A), is the same function for
δ = c > c_high (:func:`two_sided_gap` checks it token for token).
"""
from __future__ import annotations

import torch

from ...clipping.loss import token_surrogate
from ...synthetic import stale_batch
from ..config import BanditConfig
from ..schedule import Schedule
from ..simulate import simulate


def gradient_weights(ratio, adv, c_low: float, c_high: float, dual_clip: float | None = None) -> torch.Tensor:
    """Per token ∂surrogate/∂log π (autograd through :func:`toy_rl.clipping.loss.token_surrogate`): r·A where
    the token keeps its gradient, 0 where it is clipped (or dual-clipped)."""
    log_r = ratio.detach().log().requires_grad_(True)
    s = token_surrogate(log_r.exp(), adv, c_low, c_high, dual_clip)
    (g,) = torch.autograd.grad(s.sum(), (log_r,))
    return g


def two_sided_surrogate(ratio, adv, c_low: float, c_high: float, delta: float) -> torch.Tensor:
    """TRL's two-sided clipping as #3435 writes it: min(min(r, δ)·A, clip(r, c_low, c_high)·A)."""
    return torch.minimum(torch.clamp(ratio, max=delta) * adv, torch.clamp(ratio, c_low, c_high) * adv)


def two_sided_gap(ratio, adv, c_low: float, c_high: float, delta: float) -> float:
    """Largest |TRL's δ surrogate − dual-clip at c = δ| over the tokens (0.0: the same function)."""
    return float((two_sided_surrogate(ratio, adv, c_low, c_high, delta)
                  - token_surrogate(ratio, adv, c_low, c_high, delta)).abs().max())


def negative_branch_table(drifts=(0.3, 0.6, 1.0, 1.5), c: float = 3.0, c_low: float = 0.8, c_high: float = 1.2,
                          seed: int = 0, **sizes) -> dict:
    """On synthetic stale batches of growing drift (std of log r): who carries the gradient, without and with
    dual-clip at ``c``. Per drift: ``neg_above_c`` (share of tokens with A < 0 and r > c), ``their_weight_share``
    (their share of Σ|∂surrogate/∂log π| without dual-clip), ``max_w_neg`` / ``max_w_neg_dual`` (largest
    |weight| of a negative token without / with it), ``max_w_pos`` (of a positive token; dual-clip leaves
    positives alone), ``ratio_max`` and ``two_sided_gap`` (TRL's δ = c against dual-clip)."""
    rows = {}
    for d in drifts:
        b = stale_batch(drift=d, seed=seed, dtype=torch.float64, **sizes)
        m = b.mask > 0
        ratio = (b.logp - b.old_logp).exp()[m]
        adv = b.advantages[:, None].expand_as(b.mask)[m]
        w, w_dual = gradient_weights(ratio, adv, c_low, c_high), gradient_weights(ratio, adv, c_low, c_high, c)
        hit = (adv < 0) & (ratio > c)
        neg, pos = adv < 0, adv > 0
        rows[f"drift {d:g}"] = dict(
            neg_above_c=float(hit.double().mean()),
            their_weight_share=float(w[hit].abs().sum() / w.abs().sum()),
            max_w_neg=float(w[neg].abs().max()), max_w_neg_dual=float(w_dual[neg].abs().max()),
            max_w_pos=float(w[pos].abs().max()), ratio_max=float(ratio.max()),
            two_sided_gap=two_sided_gap(ratio, adv, c_low, c_high, c))
    return rows


def bandit_dual_clip(config: BanditConfig = BanditConfig(preset="trap"), seeds=range(8),
                     schedule: Schedule = Schedule(minibatches=8, lag=4), c: float = 3.0) -> dict:
    """The bandit on a very stale schedule, without and with dual-clip at ``c``: how often the cap acts there.
    Returns ``{"runs": (without, with), "dual_clip_frac", "updates_with_cap", "ratio_max", "reward_gap"}``
    (reward_gap: largest |difference| of the mean expected reward over training between the two, per seed)."""
    plain, capped = (simulate(config, "symmetric", seeds, schedule=schedule, dual_clip=dc) for dc in (None, c))
    frac = capped.metrics["dual_clip_frac"]
    gap = abs(plain.metrics["expected_reward"].mean(1) - capped.metrics["expected_reward"].mean(1)).max()
    return dict(runs=(plain, capped), dual_clip_frac=float(frac.mean()), updates_with_cap=float((frac > 0).mean()),
                ratio_max=float(plain.metrics["ratio_max"].max()), reward_gap=float(gap))
