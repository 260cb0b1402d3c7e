"""Per-update numbers that tell which regime a batch is in, whatever rule trains on it.

BAPO's search (Algorithm 1) starts every update at c_low = a⁻ = 0.6, c_high = a⁺ = 1.2 (§5.1) and only
moves when the positive share ρ (Eq. 8) there is below ρ0. So ρ *at the start bounds* says whether BAPO
would act on this batch at all; :func:`balance_at_start` measures it for every rule, symmetric runs
included, under both readings of which tokens count (``count="grad"``, ``"all"``; see
:mod:`toy_rl.clipping.balance`), together with λ, how many answer tokens have a negative advantage per
token with a positive one.

On-policy (every ratio r = 1, inside both start bounds) both readings give
ρ = pos / (pos + neg) = 1 / (1 + λ_A) with λ_A = Σ_{A<0} |A| / Σ_{A>0} A summed over tokens
(``lambda_mass``). That is 1 / (1 + λ) for the token count λ (``lambda_tokens``) exactly when every
token's |A| is the same (e.g. every GRPO group half right). In general, with group-normalised advantages
(mean zero in each group) and 0/1 rewards, a group's right answers share the same |A|-sum as its wrong
ones, so λ_A is the mean length of wrong answers over that of right ones (groups weighted by their
|A|-sum), while λ also counts how many answers are wrong (see docs/protocol.md).
"""
from __future__ import annotations

import torch

from ..clipping import BAPO
from ..clipping.balance import balance_of, masses

# BAPO's defaults (paper §5.1), read off the class so every gate and verdict uses the same numbers:
RHO0 = BAPO().rho0                                        # the target ρ0
START = (BAPO().low_range[0], BAPO().high_range[0])       # the start bounds (a⁻, a⁺) = (0.6, 1.2)


def _ratio(num: float, den: float) -> float | None:
    """num / den; +inf when only the numerator has tokens, None when neither has any."""
    if den > 0:
        return num / den
    return float("inf") if num > 0 else None


@torch.no_grad()
def start_balance(ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, start=START) -> dict:
    """Per run, the masses that say how long wrong answers tip the loss, from (runs, tokens) inputs (``adv`` per
    token): ``pos`` = Σ_{A>0} A·m and ``neg`` = Σ_{A<0} |A|·m, so λ_A = neg / pos (docs/protocol.md §1; on-policy
    ρ = 1/(1 + λ_A)), and ``rho_start_grad`` / ``rho_start_all``, ρ = pos/(pos + neg) of BAPO's Eq. 8 at the bounds
    ``start`` with count "grad" / "all" (:mod:`toy_rl.clipping.balance`): the balance BAPO's search sees before it
    moves; NaN where no mass is left to balance. Tensors (runs,). Rung 1 logs these per run
    (:func:`toy_rl.bandit.simulate.length_balance`), rungs 2 and 3 per batch (:func:`balance_at_start`)."""
    out = {"pos": (adv.clamp(min=0) * mask).sum(1), "neg": ((-adv).clamp(min=0) * mask).sum(1)}
    for count in ("grad", "all"):
        p, q = masses(ratio, adv, mask, *start, count)
        out[f"rho_start_{count}"] = torch.where(p + q > 0, balance_of(p, q, "share"), torch.nan)
    return out


@torch.no_grad()
def balance_at_start(ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, start=START) -> dict:
    """λ and ρ at BAPO's start bounds for one batch; no gradient, one host transfer, no randomness.

    Args:
        ratio: (batch, tokens) r = π_θ/π_behaviour per token (e.g. ``toy_rl.clipping.token_ratio``).
        adv: (batch,) per answer, or (batch, tokens) per token.
        mask: (batch, tokens), 1 where a token is trained on.
        start: the bounds (c_low, c_high) to measure ρ at; default BAPO's (0.6, 1.2).

    Returns floats: ``lambda_tokens`` (tokens with A < 0 / tokens with A > 0; +inf with no positive
    token, None with neither), ``lambda_mass`` (the same with |A| weights), ``rho_start_grad`` and
    ``rho_start_all`` (ρ = pos/(pos + neg) at ``start`` with ``count`` "grad" and "all"; 1 when there
    is no negative mass, as :func:`toy_rl.clipping.balance.balance_of`).
    """
    ratio = ratio.detach().float()
    m = mask.to(ratio.device, torch.float32)
    adv = adv.detach().to(ratio.device, torch.float32)
    if adv.shape != ratio.shape:
        adv = adv.reshape(adv.shape[0], -1).expand_as(ratio)
    r, a, mm = ratio.reshape(1, -1), adv.reshape(1, -1), m.reshape(1, -1)         # the batch as one run
    s = start_balance(r, a, mm, start)
    rho = [s[f"rho_start_{count}"][0].nan_to_num(1.0) for count in ("grad", "all")]    # no mass: 1, as balance_of
    n_pos, n_neg = ((a > 0) * mm).sum(), ((a < 0) * mm).sum()
    together = torch.stack([n_pos, n_neg, s["pos"][0], s["neg"][0], *rho])               # one host transfer
    n_pos, n_neg, w_pos, w_neg, grad, all_ = together.double().tolist()
    return {"lambda_tokens": _ratio(n_neg, n_pos), "lambda_mass": _ratio(w_neg, w_pos),
            "rho_start_grad": grad, "rho_start_all": all_}
