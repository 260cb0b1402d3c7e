"""Question 3, what a clip fraction counts (huggingface/trl#3144; #3032 noticed the same code): the tokens whose
gradient the clip removed, which needs the sign of the advantage.

Per token the surrogate is min(r·A, clip(r, c_low, c_high)·A) (BAPO Eq. 3). It takes the clipped, flat branch
only on one side per sign: A > 0 and r > c_high, or A < 0 and r < c_low. A token outside [c_low, c_high] on the
other side (A > 0 with r < c_low, A < 0 with r > c_high) keeps its full gradient r·A: the min picks the
unclipped term there. Four ways to count, on the same batch:

    out_of_bounds    r < c_low or r > c_high, whatever A (a sign-blind count, what CleanRL's ``clipfrac``
                     |r − 1| > ε measures for symmetric bounds);
    min_picks_rA     r·A < clip(r)·A: TRL's GRPOTrainer count before its fix (the code #3144 quotes), the
                     out-of-bounds tokens that keep their gradient, i.e. exactly the ones *not* clipped;
    sign_aware       (A > 0 and r > c_high) or (A < 0 and r < c_low), split into ``low`` and ``high``: what
                     TRL logs since (clip_ratio/low_mean, high_mean, region_mean) and toy_rl's policy_loss
                     reports (clip_frac_low, clip_frac_high);
    zero_gradient    tokens whose ∂loss/∂log π is exactly 0, by autograd through policy_loss (A ≠ 0 only).

sign_aware = zero_gradient, and out_of_bounds = sign_aware + min_picks_rA + outside_with_A_zero (tokens of
groups whose answers all scored the same: A = 0, no gradient whatever r), token for token.
"""
from __future__ import annotations

import torch

from ...clipping import ClipHigher, Symmetric, policy_loss, token_ratio
from ...synthetic import stale_batch


def clip_counts(ratio, adv, mask, c_low: float, c_high: float) -> dict:
    """The four counts above as fractions of the masked tokens (ratio, adv, mask broadcast to one shape)."""
    adv = adv.expand_as(ratio)
    m = mask.to(torch.bool)
    frac = lambda cond: int((cond & m).sum()) / int(m.sum())
    clipped_ratio = ratio.clamp(c_low, c_high)
    low, high = (ratio < c_low) & (adv < 0), (ratio > c_high) & (adv > 0)
    outside = (ratio < c_low) | (ratio > c_high)
    return dict(out_of_bounds=frac(outside), outside_with_A_zero=frac(outside & (adv == 0)),
                min_picks_rA=frac(ratio * adv < clipped_ratio * adv),
                sign_aware_low=frac(low), sign_aware_high=frac(high), sign_aware=frac(low | high))


def zero_gradient_fraction(logp, old_logp, adv, mask, rule) -> float:
    """Share of the masked tokens with A ≠ 0 whose gradient through ``policy_loss`` is exactly 0, over all
    masked tokens (so it compares with the clip fractions)."""
    logp = logp.detach().clone().requires_grad_(True)
    loss, _ = policy_loss(logp, old_logp, adv, mask, rule)
    (grad,) = torch.autograd.grad(loss, (logp,))
    a = adv.reshape(adv.shape[0], -1).expand_as(logp)
    m = mask > 0
    return int(((grad == 0) & (a != 0) & m).sum()) / int(m.sum())


def clip_count_table(drifts=(0.1, 0.3, 0.6, 1.0), rules=None, seed: int = 0, **sizes) -> dict:
    """{"<rule> drift <d>": counts} on synthetic stale batches (:func:`toy_rl.synthetic.stale_batch`), each
    with ``zero_gradient`` and ``policy_loss_frac`` (policy_loss's own clip_frac) beside the four counts."""
    rules = rules or {"symmetric": Symmetric(), "clip-higher": ClipHigher()}
    rows = {}
    for d in drifts:
        b = stale_batch(drift=d, seed=seed, dtype=torch.float64, **sizes)
        ratio = token_ratio(b.logp, b.old_logp)
        adv = b.advantages[:, None].expand_as(ratio)
        for name, rule in rules.items():
            row = clip_counts(ratio, adv, b.mask, rule.c_low, rule.c_high)
            row["zero_gradient"] = zero_gradient_fraction(b.logp, b.old_logp, b.advantages, b.mask, rule)
            row["policy_loss_frac"] = policy_loss(b.logp, b.old_logp, b.advantages, b.mask, rule)[1]["clip_frac"]
            rows[f"{name} drift {d:g}"] = row
    return rows
