"""The clipped policy-gradient loss shared by every rung (docs/paper_vs_code.md, "Objective").

Per token, with r = exp(clamp(logp − old_logp, ±20)) and bounds from the rule:

    surrogate = min(r·A, clip(r, c_low, c_high)·A)            (PPO; BAPO Eq. 3)
    dual-clip (A < 0 only): max(surrogate, c·A)                (Ye et al. 2020; verl clip_ratio_c)

``loss`` is the negative aggregated surrogate, to minimise.

Clip fractions are sign-aware, as TRL counts them: ``clip_frac_low`` is the
share of tokens with r < c_low and A < 0, ``clip_frac_high`` those with
r > c_high and A > 0 — exactly the tokens that lose their gradient
(:func:`clipped_mask`).
(verl's ``pg_clipfrac_lower`` means the dual-clip instead: here that is
``dual_clip_frac``. CleanRL's ``clipfrac`` ignores the sign.)
"""
from __future__ import annotations

import inspect
import math

import torch

from .checks import check_loss_inputs

LOG_RATIO_CLAMP = 20.0   # as the authors' code and verl do


def clamped_log_ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """log r = logp − old_logp, clamped to ±20 so that exp(log r) stays finite."""
    return torch.clamp(logp - old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def token_ratio(logp: torch.Tensor, old_logp: torch.Tensor) -> torch.Tensor:
    """r = π_θ / π_behaviour per token, from log-probs (log-ratio clamped to ±20)."""
    return torch.exp(clamped_log_ratio(logp, old_logp))


def clipped_mask(ratio: torch.Tensor, adv: torch.Tensor, c_low, c_high) -> torch.Tensor:
    """Which tokens lost their gradient to clipping (BAPO Eq. 3): r < c_low with A < 0, or r > c_high with A > 0.

    There min(r·A, clip(r, c_low, c_high)·A) takes the clipped, constant branch. A token exactly at a
    bound keeps its gradient (torch.clamp passes it). ``c_low``/``c_high`` are numbers or tensors that
    broadcast against ``ratio``; pass None for a side to leave it out (e.g. the lower side alone).
    Inside the mask, ``~clipped_mask(...)`` are the tokens that still carry gradient (BAPO's
    count="grad"). Dual-clip (r > c with A < 0) is not included: see ``dual_clip_frac``.
    """
    low = (ratio < c_low) & (adv < 0) if c_low is not None else torch.zeros_like(ratio, dtype=torch.bool)
    high = (ratio > c_high) & (adv > 0) if c_high is not None else torch.zeros_like(ratio, dtype=torch.bool)
    return low | high


def token_surrogate(ratio: torch.Tensor, adv: torch.Tensor, c_low, c_high, dual_clip: float | None = None) -> torch.Tensor:
    """The per-token clipped surrogate min(r·A, clip(r, c_low, c_high)·A) (BAPO Eq. 3), with the
    dual-clip max(·, c·A) on A < 0 tokens when ``dual_clip`` is a number; to maximise (the loss is its
    negative, aggregated). ``c_low``/``c_high``: numbers or tensors that broadcast against ``ratio``."""
    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, c_low, c_high) * adv)
    if dual_clip is not None:
        surrogate = torch.where(adv < 0, torch.maximum(surrogate, dual_clip * adv), surrogate)
    return surrogate


def aggregate(values: torch.Tensor, mask: torch.Tensor, agg: str) -> torch.Tensor:
    """Average per-token values over the mask, one number per run: (runs, batch, tokens) -> (runs,).

    "token-mean": every token weighs the same (DAPO, verl default).
    "seq-mean-token-mean": mean over each sequence, then over sequences (original GRPO);
        sequences with no token are left out.
    "seq-mean-token-sum-norm": token sum divided by batch × max length (Dr. GRPO).
    """
    if agg == "token-mean":
        return (values * mask).sum((1, 2)) / mask.sum((1, 2))
    if agg == "seq-mean-token-mean":
        n = mask.sum(2)
        has = (n > 0).to(values.dtype)
        return ((values * mask).sum(2) / n.clamp(min=1) * has).sum(1) / has.sum(1)
    return (values * mask).sum((1, 2)) / mask[0].numel()


def token_weights(mask: torch.Tensor, agg: str) -> torch.Tensor:
    """How much each token weighs in :func:`aggregate`, up to one factor per run (tokens on the last axis).

    "token-mean" and "seq-mean-token-sum-norm" weigh every token the same: the mask itself.
    "seq-mean-token-mean" weighs a token 1/len(its sequence). Measured with these weights, BAPO's
    positive/negative masses (Eq. 8) and ρ are shares of the loss actually optimised.
    """
    if agg == "seq-mean-token-mean":
        return mask / mask.sum(-1, keepdim=True).clamp(min=1)
    return mask


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                rule, agg: str = "token-mean", dual_clip: float | None = None):
    """Clipped surrogate loss for one update, with the bounds chosen by ``rule``.

    Args:
        logp: (batch, tokens) log-probs of the sampled tokens under the policy being trained.
        old_logp: (batch, tokens) log-probs recorded by the behaviour policy at sampling time
            (constants: a tensor that requires grad is refused, pass ``old_logp.detach()``).
        advantages: (batch, tokens), or (batch,) / (batch, 1) per sequence (broadcast); constants too.
        mask: (batch, tokens), 1 (or True) where a token is trained on.
        rule: ``Symmetric()``, ``ClipHigher()`` or ``BAPO()`` (any :class:`~toy_rl.clipping.rules.ClippingRule`).
        agg: "token-mean", "seq-mean-token-mean" or "seq-mean-token-sum-norm" (see :func:`aggregate`).
            The rule measures the masses and ρ with the same token weights (:func:`token_weights`):
            under "seq-mean-token-mean" a token weighs 1/len(its sequence), so ρ is the positive share
            of the loss optimised and BAPO steers that. (Rules whose ``bounds`` takes no ``weights``
            argument get the plain mask.)
        dual_clip: c > 1 to cap the loss of A < 0 tokens at c·|A| (None: off).

    Returns:
        (loss, stats): a scalar tensor to minimise, and a dict of floats (read in
        one host transfer): ``c_low``, ``c_high``, ``rho``, ``pos_mass``,
        ``neg_mass``, ``clip_frac_low``, ``clip_frac_high``, ... (see README).

    float16/bfloat16 inputs are computed in float32; gradients flow back to them.
    """
    adv = check_loss_inputs(logp, old_logp, advantages, mask, agg, dual_clip)
    loss, stats = _loss_and_stats(logp[None], old_logp[None], adv[None], mask[None], rule, agg, dual_clip)
    values = torch.stack(list(stats.values()))[:, 0].to(torch.float64).tolist()
    out = dict(zip(stats, values))
    if not math.isfinite(out["loss"]):                    # read with the stats: no extra host transfer
        raise ValueError(f"the loss overflowed {loss.dtype} (it is {out['loss']}): advantages up to "
                         f"{float(adv.abs().max()):.3g} times ratios up to {out['ratio_max']:.3g} exceed its range; "
                         "scale the advantages down (group-normalised ones are of order 1)")
    return loss[0], out


def policy_loss_runs(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                     rule, agg: str = "token-mean", dual_clip: float | None = None):
    """:func:`policy_loss` for independent runs side by side, e.g. one per seed.

    Tensors are (runs, batch, tokens) (advantages may be (runs, batch)); each run
    gets its own bounds (BAPO searches each run separately). Returns
    ``(loss, stats)``: ``loss`` is (runs,) — call ``loss.sum().backward()`` to
    give each run its own gradient — and ``stats`` a dict of (runs,) tensors,
    left on the device (no host transfer at all).
    """
    adv = check_loss_inputs(logp, old_logp, advantages, mask, agg, dual_clip, runs=True)
    return _loss_and_stats(logp, old_logp, adv, mask, rule, agg, dual_clip)


def _loss_and_stats(logp, old_logp, adv, mask, rule, agg, dual_clip):
    """The surrogate on checked (runs, batch, tokens) inputs."""
    dtype = torch.promote_types(logp.dtype, torch.float32)
    logp_, old, adv = logp.to(dtype), old_logp.to(dtype), adv.to(dtype)
    m = mask.to(dtype)
    runs = logp.shape[0]

    log_ratio = clamped_log_ratio(logp_, old)
    ratio = torch.exp(log_ratio)
    w = token_weights(m, agg)
    with torch.no_grad():
        b = _rule_bounds(rule, ratio.detach().reshape(runs, -1), adv.reshape(runs, -1), m.reshape(runs, -1),
                         None if w is m else w.reshape(runs, -1))

    lo, hi = b.c_low[:, None, None], b.c_high[:, None, None]
    loss = -aggregate(token_surrogate(ratio, adv, lo, hi, dual_clip), m, agg)

    with torch.no_grad():
        stats = _stats(ratio.detach(), log_ratio.detach(), adv, m, lo, hi, b, dual_clip)
        stats["loss"] = loss.detach()
    return loss, stats


def _rule_bounds(rule, ratio, adv, mask, weights):
    """``rule.bounds(ratio, adv, mask)``, passing ``weights=`` to rules whose bounds() takes them."""
    if weights is not None and "weights" in inspect.signature(rule.bounds).parameters:
        return rule.bounds(ratio, adv, mask, weights=weights)
    return rule.bounds(ratio, adv, mask)


def _stats(ratio, log_ratio, adv, m, lo, hi, b, dual_clip) -> dict:
    """Diagnostics, one (runs,) tensor each (documented in docs/library.md, "The clipping core")."""
    n = m.sum((1, 2))
    frac = lambda cond: (cond.to(m.dtype) * m).sum((1, 2)) / n
    big = torch.finfo(ratio.dtype).max
    stats = {
        "c_low": b.c_low, "c_high": b.c_high,
        "rho": b.rho, "pos_mass": b.pos, "neg_mass": b.neg,
        "pos_neg_ratio": torch.where(b.neg > 0, b.pos / b.neg.clamp(min=1e-30), torch.full_like(b.neg, float("inf"))),
        "clip_frac_low": frac(clipped_mask(ratio, adv, lo, None)),
        "clip_frac_high": frac(clipped_mask(ratio, adv, None, hi)),
        "dual_clip_frac": frac((ratio > dual_clip) & (adv < 0)) if dual_clip is not None else torch.zeros_like(n),
        "neg_adv_frac": frac(adv < 0),
        "pos_adv_frac": frac(adv > 0),
        "ratio_mean": (ratio * m).sum((1, 2)) / n,
        "ratio_min": torch.where(m > 0, ratio, torch.full_like(ratio, big)).amin((1, 2)),
        "ratio_max": torch.where(m > 0, ratio, torch.full_like(ratio, -big)).amax((1, 2)),
        "approx_kl": ((ratio - 1 - log_ratio) * m).sum((1, 2)) / n,     # k3 estimator of KL(behaviour ‖ policy)
        "n_tokens": n,
        "rho_before": b.extra.get("rho_before", b.rho),
        "search_steps": b.extra.get("search_steps", torch.zeros_like(n)),
    }
    stats.update({k: b.extra[k] for k in ("rho_target", "rho_reached") if k in b.extra})
    stats["clip_frac"] = stats["clip_frac_low"] + stats["clip_frac_high"]
    return stats
