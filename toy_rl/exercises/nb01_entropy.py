"""Exercises of notebook 01 (the Entropy-Clip Rule): the covariance prediction, and the clip mask."""
from __future__ import annotations

import torch

from . import register
from .framework import Case, Exercise, Mistake, close, exact

NB = "01_entropy_clip_rule"
T = lambda *v: torch.tensor(v, dtype=torch.float64)     # noqa: E731


# ----------------------------------------------------------------------------- ΔH ≈ −Cov(log π, Δz)

def _weighted_cov(x, y, w):
    return (w * (x - (w * x).sum()) * (y - (w * y).sum())).sum()


def _prediction_cases():
    cases = [
        Case("uniform policy", (torch.zeros(4, dtype=torch.float64), T(1.0, 0.0, 0.0, 0.0)),
             note="every log π(a) is the same, so nothing can covary with it: ΔH ≈ 0"),
        Case("a constant added to every logit", (T(2.0, 1.0, 0.0, -1.0), T(0.5, 0.5, 0.5, 0.5)),
             note="adding a constant to all logits leaves π unchanged, so the prediction must be 0"),
        Case("push the likeliest token up", (T(2.0, 1.0, 0.0, -1.0), T(0.1, 0.0, 0.0, 0.0)),
             note="making a likely token likelier sharpens π: the entropy falls (ΔH < 0)"),
        Case("push the least likely token up", (T(2.0, 1.0, 0.0, -1.0), T(0.0, 0.0, 0.0, 0.1)),
             note="making an unlikely token likelier flattens π: the entropy rises (ΔH > 0)"),
        Case("a peaked softmax, mixed step", (T(3.0, 0.0, 0.0, 0.0, -2.0), T(-0.2, 0.1, 0.3, 0.0, 0.05))),
    ]
    g = torch.Generator().manual_seed(101)
    for i in range(6):
        k = int(torch.randint(3, 21, (1,), generator=g))
        temp = 0.3 + 2.7 * float(torch.rand(1, generator=g, dtype=torch.float64))
        z = temp * torch.randn(k, generator=g, dtype=torch.float64)
        dz = 0.1 * torch.randn(k, generator=g, dtype=torch.float64)
        cases.append(Case(f"random softmax #{i + 1} (K = {k})", (z, dz), random=True))
    return cases


def _sign_flipped(logits, dz):
    lp = torch.log_softmax(logits, -1)
    return _weighted_cov(lp, dz, lp.exp())


def _plain_average(logits, dz):
    lp = torch.log_softmax(logits, -1)
    return -_weighted_cov(lp, dz, torch.full_like(lp, 1.0 / lp.numel()))


def _with_pi(logits, dz):
    pi = torch.softmax(logits, -1)
    return -_weighted_cov(pi, dz, pi)


def _not_centred(logits, dz):
    lp = torch.log_softmax(logits, -1)
    return -(lp.exp() * lp * dz).sum()


def _only_pi_weighted_product(logits, dz):
    lp = torch.log_softmax(logits, -1)
    pi = lp.exp()
    return -((pi * lp).sum() * (pi * dz).sum())


def _exact_vs_prediction(fn):
    """After every case passed: the student's prediction next to the exact entropy change, for shrinking steps."""
    g = torch.Generator().manual_seed(7)
    z = 1.5 * torch.randn(8, generator=g, dtype=torch.float64)
    direction = torch.randn(8, generator=g, dtype=torch.float64)
    H = lambda v: -(torch.softmax(v, -1) * torch.log_softmax(v, -1)).sum()    # noqa: E731
    rows = []
    for eta in (0.1, 0.01, 0.001):
        dz = eta * direction
        rows.append(f"η = {eta:g}: exact ΔH {float(H(z + dz) - H(z)):+.3e}, yours {float(fn(z.clone(), dz.clone())):+.3e}")
    return True, "against the exact entropy change on one softmax (the gap shrinks like η²):\n      " + "\n      ".join(rows)


# ----------------------------------------------------------------------------- which tokens keep their gradient

def _mask_cases():
    cases = [
        Case("on-policy: every ratio is 1", (T(1.0, 1.0, 1.0, 1.0), T(1.5, -0.5, -0.5, -0.5), 0.8, 1.2),
             note="on-policy nothing is clipped: every token keeps its gradient"),
        Case("the four sides", (T(0.5, 0.5, 1.5, 1.5), T(1.0, -1.0, 1.0, -1.0), 0.8, 1.2),
             note="tokens: a good one that fell, a bad one that fell, a good one that rose, a bad one that rose"),
        Case("exactly on a bound", (T(0.8, 1.2, 0.8, 1.2), T(-1.0, 1.0, 1.0, -1.0), 0.8, 1.2),
             note="a token exactly on a bound keeps its gradient: clip(r) = r there (clipped means r < c_low or r > c_high)"),
        Case("zero advantage", (T(0.3, 3.0, 1.0), T(0.0, 0.0, 0.0), 0.8, 1.2),
             note="A = 0 is neither a good nor a bad token: it is not clipped (X = 1), it just pushes with weight 0"),
        Case("a batch (2 sequences x 3 tokens)",
             (T(0.7, 1.1, 1.3, 0.9, 2.0, 0.5).reshape(2, 3), T(-1.0, 1.0, 1.0, -1.0, -1.0, 1.0).reshape(2, 3), 0.8, 1.28),
             note="the answer has the shape of the input: one True/False per token"),
    ]
    g = torch.Generator().manual_seed(102)
    for i in range(5):
        n = int(torch.randint(5, 40, (1,), generator=g))
        ratio = torch.exp(0.4 * torch.randn(n, generator=g, dtype=torch.float64))
        adv = torch.randn(n, generator=g, dtype=torch.float64)
        adv[torch.rand(n, generator=g) < 0.15] = 0.0
        c_low = round(0.6 + 0.3 * float(torch.rand(1, generator=g)), 2)
        c_high = round(1.1 + 1.0 * float(torch.rand(1, generator=g)), 2)
        cases.append(Case(f"random tokens #{i + 1}", (ratio, adv, c_low, c_high), random=True))
    return cases


def _sign_blind(ratio, adv, c_low, c_high):
    return (ratio >= c_low) & (ratio <= c_high)


def _inverted(ratio, adv, c_low, c_high):
    return ((adv > 0) & (ratio > c_high)) | ((adv < 0) & (ratio < c_low))


def _swapped_sides(ratio, adv, c_low, c_high):
    return ~(((adv > 0) & (ratio < c_low)) | ((adv < 0) & (ratio > c_high)))


def _strict_bounds(ratio, adv, c_low, c_high):
    return ~(((adv > 0) & (ratio >= c_high)) | ((adv < 0) & (ratio <= c_low)))


def _zero_adv_clipped(ratio, adv, c_low, c_high):
    keep = ~(((adv > 0) & (ratio > c_high)) | ((adv < 0) & (ratio < c_low)))
    return keep & (adv != 0)


register(
    Exercise(
        name="entropy_change_prediction", notebook=NB,
        title="the first-order prediction ΔH ≈ −Cov_π(log π, Δz) for one softmax and one logit step",
        solution="toy_rl.solutions.nb01:entropy_change_prediction",
        cases=_prediction_cases,
        nudge="with π = softmax(logits): E_π[f] = Σ_a π(a)·f(a) and Cov_π(X, Y) = E_π[(X − E_π X)·(Y − E_π Y)]; "
              "the prediction is minus that covariance, with X = log π and Y = Δz.",
        mistakes=(
            Mistake(_sign_flipped, "the sign: ΔH ≈ −Cov(log π, Δz). Pushing up a token that is already likely "
                                   "sharpens π, so the entropy must fall."),
            Mistake(_plain_average, "the covariance is under a ∼ π: weigh each token by π(a), not by 1/K "
                                    "(np.cov / a plain mean treats all tokens alike)."),
            Mistake(_with_pi, "covary with log π(a), not π(a)."),
            Mistake(_not_centred, "a covariance subtracts the means: E_π[(log π − E_π log π)(Δz − E_π Δz)]. "
                                  "Check: adding a constant to Δz must change nothing."),
            Mistake(_only_pi_weighted_product, "Cov(X, Y) = E[XY] − E[X]·E[Y]: you have only the second term."),
        ),
        compare=close(rtol=1e-6, atol=1e-12),
        extra=_exact_vs_prediction,
    ),
    Exercise(
        name="clip_mask", notebook=NB,
        title="which tokens keep their gradient under min(r·A, clip(r, c_low, c_high)·A): the X(a) of the rule",
        solution="toy_rl.solutions.nb01:clip_mask",
        cases=_mask_cases,
        nudge="a token loses its gradient only when the clipped branch is the smaller one and flat: "
              "A > 0 with r > c_high, or A < 0 with r < c_low. Every other token keeps it (X = 1).",
        mistakes=(
            Mistake(_sign_blind, "the min clips only one side per sign: a good token (A > 0) with r < c_low still "
                                 "pushes, and so does a bad token (A < 0) with r > c_high. The sign of A decides which "
                                 "bound can bite."),
            Mistake(_inverted, "return True for the tokens that KEEP their gradient (X = 1), False for the clipped ones."),
            Mistake(_swapped_sides, "A > 0 tokens lose their gradient above c_high (they already became likely "
                                    "enough); A < 0 tokens below c_low (already unlikely enough)."),
            Mistake(_strict_bounds, "a token exactly on a bound keeps its gradient: only r > c_high (A > 0) or "
                                    "r < c_low (A < 0) is clipped."),
            Mistake(_zero_adv_clipped, "a token with A = 0 is not clipped (X = 1): it carries a zero-weight gradient, "
                                       "but no bound removes it."),
        ),
        compare=exact(as_bool=True),
    ),
)
