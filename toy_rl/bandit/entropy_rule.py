"""Checking the Entropy-Clip Rule numerically (BAPO Eq. 6–7, App. B; Cui et al. 2025).

For a softmax π = softmax(z) and any small logit change Δz (Cui et al. 2025,
arXiv 2505.22617, exact to first order since ∂H/∂z_b = −π_b (log π_b − E_π log π)):

    ΔH ≈ −Cov_{a∼π}(log π(a), Δz_a)                                  (identity)

The tabular clipped objective J(z) = Σ_a π_b(a)·min(r_a·A_a, clip(r_a, c_low, c_high)·A_a),
r_a = π(a)/π_b(a), has the gradient ∂J/∂z_a = π(a)·(A(a)·X(a) − E_π[A·X]) where
X(a) = 0 for clipped tokens (A > 0 and r > c_high, or A < 0 and r < c_low), else 1.
With C = Σ_{X=0} π(a)·A(a), the clipped tokens' mass, −E_π[A·X] = C whenever
E_π[A] = 0 (advantages centred under the current policy). So:

    natural PG, Δz = η·(A·X + C):   ΔH ≈ −η·Cov(log π, A·X + C)      (paper Eq. 6–7; App. B)
    vanilla PG, Δz = η·π·(A·X + C): ΔH ≈ −η·Cov(log π, π·(A·X + C))  (Cui et al.'s vanilla form)

The paper's printed form is the natural-PG one (its proof drops the π factor).
:func:`verify` draws many random instances (logits, rewards and advantages,
a behaviour policy that drifted from the current one — random ratios — and a
rule), takes one exact step per instance and compares H(z + Δz) − H(z) with
the predictions, for several step sizes η: the error must shrink like η²
(log-log slope 2) and the sign must agree wherever the prediction is not ~0.
Every update goes through the shared loss :func:`toy_rl.clipping.policy_loss_runs`
(one run per instance, the K tokens as the batch, advantages weighted by K·π_b
so the token-mean is the exact expectation over a ∼ π_b).
"""
from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import torch

from ..clipping import as_rule, clipped_mask, make_rule, policy_loss_runs
from ..clipping.loss import LOG_RATIO_CLAMP
from .policy import entropy, log_probs
from .quadrants import QUADRANTS, entropy_shares, quadrant_of, split_by_quadrant
from ..threads import single_thread

RULE_NAMES = ("symmetric", "clip-higher", "bapo")
ETAS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)     # two decades of step sizes for the O(η²) slope
ETA_REF = 1e-2                            # where sign agreement and relative error are reported
ZERO_TOL = 1e-3                           # a prediction is "~0" if |ΔH_pred| < ZERO_TOL · η (nats)
BASELINES = ("current", "behaviour")


class Instances(NamedTuple):
    logits: torch.Tensor            # (N, K) current policy z
    behaviour_logits: torch.Tensor  # (N, K) the policy that sampled the data; r = π/π_b
    rewards: torch.Tensor           # (N, K) R(a)
    advantages: torch.Tensor        # (N, K) A(a) = R(a) − E[R], maybe / std[R]
    rule: torch.Tensor              # (N,) index into RULE_NAMES
    drift: torch.Tensor             # (N,) std of the log-logit drift behind the ratios (0 = on-policy)


def random_instances(n: int = 10_000, n_tokens: int = 16, seed: int = 0, baseline: str = "current",
                     dtype=torch.float64) -> Instances:
    """Random tabular instances, all shaped (n, K).

    Logits z ~ temperature·N(0, 1) with temperature ∈ U(0.3, 3); behaviour logits
    z + drift·N(0, 1) with drift ∈ U(0, 0.6) (a tenth of the instances on-policy, drift 0);
    rewards 0/1 with a random success rate, or Gaussian; advantages R − E[R], divided by
    std[R] (floored at 0.05) for half of them (GRPO-like). ``baseline`` says which policy the expectation is
    under: "current" (E_π[A] = 0, the paper's setting) or "behaviour" (π_b, like a GRPO
    group mean of stale samples; then C no longer equals −E_π[A·X], see module docstring).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"instances must be an integer >= 1; got {n!r}")
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 2:
        raise ValueError(f"n_tokens (K) must be an integer >= 2; got {n_tokens!r}")
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}; got {baseline!r}")
    g = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.rand(*shape, generator=g, dtype=dtype)
    randn = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype)
    N, K = n, n_tokens

    z = (0.3 + 2.7 * rand(N, 1)) * randn(N, K)
    drift = 0.6 * rand(N) * (rand(N) > 0.1)
    zb = z + drift[:, None] * randn(N, K)

    binary = rand(N, 1) < 0.5
    rewards = torch.where(binary, (rand(N, K) < rand(N, 1)).to(dtype), randn(N, K))
    pi = log_probs(zb if baseline == "behaviour" else z).exp()
    mean = (pi * rewards).sum(-1, keepdim=True)
    std = ((pi * (rewards - mean) ** 2).sum(-1, keepdim=True)).sqrt()
    adv = rewards - mean
    adv = torch.where(rand(N, 1) < 0.5, adv / std.clamp(min=0.05), adv)   # floor: no 1e6-sized advantages
    rule = torch.randint(len(RULE_NAMES), (N,), generator=g)
    return Instances(z, zb, rewards, adv, rule, drift)


class ClippedGradient(NamedTuple):
    grad: torch.Tensor       # (N, K) ∂J/∂z of the exact tabular surrogate
    clipped: torch.Tensor    # (N, K) bool: 1 − X(a)
    ratio: torch.Tensor      # (N, K) r(a) = π(a)/π_b(a)
    c_low: torch.Tensor      # (N,)
    c_high: torch.Tensor     # (N,)


def clipped_gradient(inst: Instances, rules: dict | None = None) -> ClippedGradient:
    """∂J/∂z for every instance, through policy_loss_runs (one run per instance, one call per rule).

    ``rules`` maps names in RULE_NAMES to rule objects (default: make_rule(name)), e.g.
    ``{"clip-higher": ClipHigher(0.2, 1.0)}`` to try other bounds.
    """
    N, K = inst.logits.shape
    z = inst.logits.detach().requires_grad_(True)
    logp = log_probs(z)
    old = log_probs(inst.behaviour_logits)
    weighted_adv = K * old.exp() * inst.advantages   # token-mean over K tokens = Σ_a π_b(a)·(...)
    objective = torch.zeros((), dtype=z.dtype)
    c_low, c_high = torch.empty(N, dtype=z.dtype), torch.empty(N, dtype=z.dtype)
    for i, name in enumerate(RULE_NAMES):
        idx = (inst.rule == i).nonzero()[:, 0]
        if idx.numel() == 0:
            continue
        rule = (rules or {}).get(name) or make_rule(name)
        sub = lambda t: t[idx][..., None]            # (n_i, K, 1): run = instance, batch = tokens
        loss, stats = policy_loss_runs(sub(logp), sub(old), sub(weighted_adv), torch.ones_like(sub(old)), rule)
        objective = objective - loss.sum()
        c_low[idx], c_high[idx] = stats["c_low"], stats["c_high"]
    grad, = torch.autograd.grad(objective, z)
    with torch.no_grad():
        ratio = torch.exp(torch.clamp(logp - old, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
        adv = inst.advantages
        clipped = clipped_mask(ratio, adv, c_low[:, None], c_high[:, None])
    return ClippedGradient(grad, clipped, ratio, c_low, c_high)


def cov(log_pi: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Cov_{a∼π}(log π(a), v(a)) over the last dimension."""
    pi = log_pi.exp()
    m = (pi * log_pi).sum(-1, keepdim=True)
    return (pi * (log_pi - m) * (v - (pi * v).sum(-1, keepdim=True))).sum(-1)


def steps(grad: torch.Tensor, log_pi: torch.Tensor, etas) -> dict:
    """Δz for every η: {"vanilla": (n_eta, N, K), "natural": (n_eta, N, K)} (natural centred, E_π[Δz] = 0)."""
    eta = torch.as_tensor(etas, dtype=grad.dtype)[:, None, None]
    pi = log_pi.exp()
    nat = grad / pi.clamp(min=torch.finfo(pi.dtype).tiny)
    nat = nat - (pi * nat).sum(-1, keepdim=True)
    return {"vanilla": eta * grad, "natural": eta * nat}


def predictions(inst: Instances, cg: ClippedGradient, etas) -> dict:
    """Exact ΔH and every prediction, each (n_eta, N).

    Keys: exact_vanilla, exact_natural; first_order_vanilla, first_order_natural
    (−Cov(log π, Δz) of the actual step); paper_natural (−η·Cov(log π, A·X + C)),
    paper_vanilla (−η·Cov(log π, π·(A·X + C))); C (N,) the clipped tokens' mass.
    """
    log_pi = log_probs(inst.logits)
    pi = log_pi.exp()
    eta = torch.as_tensor(etas, dtype=pi.dtype)[:, None]
    dz = steps(cg.grad, log_pi, etas)
    h0 = entropy(inst.logits)
    X = (~cg.clipped).to(pi.dtype)
    C = (pi * inst.advantages * cg.clipped.to(pi.dtype)).sum(-1, keepdim=True)
    v_nat = inst.advantages * X + C
    out = dict(C=C[:, 0])
    for mode in ("vanilla", "natural"):
        out[f"exact_{mode}"] = entropy(inst.logits + dz[mode]) - h0
        out[f"first_order_{mode}"] = -cov(log_pi, dz[mode])
    out["paper_natural"] = -eta * cov(log_pi, v_nat)
    out["paper_vanilla"] = -eta * cov(log_pi, pi * v_nat)
    return out


def _fit_slope(etas, errors) -> float:
    """Least-squares slope of log(error) against log(η)."""
    x, y = np.log(np.asarray(etas)), np.log(np.asarray(errors))
    return float(np.polyfit(x, y, 1)[0])


def compare(exact: torch.Tensor, pred: torch.Tensor, etas, eta_ref: float = ETA_REF,
            zero_tol: float = ZERO_TOL) -> dict:
    """How well ``pred`` (n_eta, N) predicts ``exact`` (n_eta, N).

    sign_agreement and median_rel_error (|exact − pred| / |exact|) at η = eta_ref, over the
    instances whose prediction is not ~0 (|pred| ≥ zero_tol·η); error_slope: log-log slope of
    the median |exact − pred| against η; median_abs_error: that median for every η.
    """
    etas = list(etas)
    i = etas.index(eta_ref)
    e, p = exact.numpy(), pred.numpy()
    keep = np.abs(p[i]) >= zero_tol * eta_ref
    err = np.abs(e - p)
    med_err = np.median(err, axis=1)
    signs_by_eta = [float(np.mean(np.sign(e[j][np.abs(p[j]) >= zero_tol * eta]) ==
                                  np.sign(p[j][np.abs(p[j]) >= zero_tol * eta]))) for j, eta in enumerate(etas)]
    return dict(
        sign_agreement=float(np.mean(np.sign(e[i][keep]) == np.sign(p[i][keep]))),
        median_rel_error=float(np.median(err[i][keep] / np.maximum(np.abs(e[i][keep]), 1e-300))),
        error_slope=_fit_slope(etas, med_err),
        counted=int(keep.sum()),
        median_abs_error=[float(x) for x in med_err],
        sign_agreement_by_eta=signs_by_eta,
    )


def quadrant_summary(inst: Instances, cg: ClippedGradient, eta: float = ETA_REF) -> dict:
    """The four quadrants of App. B.4 per rule, averaged over that rule's instances.

    For each rule and quadrant: dH_natural / dH_vanilla — mean first-order entropy change the
    quadrant's tokens cause (their shares of −Cov(log π, Δz), see :mod:`.quadrants`);
    share — the quadrant's share of the sampled tokens (π_b-weighted); clip_frac — the share
    of the quadrant's sampled tokens the rule clips. Also per rule the mean bounds.
    """
    N, K = inst.logits.shape
    log_pi = log_probs(inst.logits)
    pi_b = log_probs(inst.behaviour_logits).exp()
    tokens = torch.arange(K).expand(N, K)
    w = log_pi.exp() * inst.advantages * (~cg.clipped).to(log_pi.dtype)      # ∂J/∂log π(a)
    q = quadrant_of(log_pi, tokens, inst.advantages, ~cg.clipped, weight=pi_b)
    split = {pg: split_by_quadrant(q, entropy_shares(log_pi, tokens, w, eta, pg), cg.clipped, weight=pi_b)
             for pg in ("natural", "vanilla")}
    out = {}
    for r, name in enumerate(RULE_NAMES):
        sel = inst.rule == r
        if not sel.any():
            continue
        row = {"c_low": float(cg.c_low[sel].mean()), "c_high": float(cg.c_high[sel].mean()),
               "instances": int(sel.sum())}
        for j, quad in enumerate(QUADRANTS):
            row[quad] = dict(dH_natural=float(split["natural"]["dH"][sel, j].mean()),
                             dH_vanilla=float(split["vanilla"]["dH"][sel, j].mean()),
                             share=float(split["natural"]["share"][sel, j].mean()),
                             clip_frac=float(np.nanmean(split["natural"]["clip_frac"][sel, j].numpy())))
        out[name] = row
    return out


def verify(instances: int = 10_000, n_tokens: int = 16, seed: int = 0, etas=ETAS, eta_ref: float = ETA_REF,
           baseline: str = "current", zero_tol: float = ZERO_TOL) -> dict:
    """Check the Entropy-Clip Rule on random instances; returns a JSON-ready report.

    Top-level ``sign_agreement``, ``median_rel_error`` and ``error_slope`` are for the
    first-order identity ΔH ≈ −Cov(log π, Δz) with the actual step, both PG modes pooled
    (2 × instances comparisons). ``forms`` has every form separately:
    first_order_vanilla/natural, paper_natural (Eq. 6–7 vs the natural-PG step),
    paper_vanilla (−η·Cov(log π, π·(A·X + C)) vs the vanilla step), and
    paper_form_on_vanilla_step (the printed natural form used to predict a vanilla step:
    only its sign is meaningful, the scales differ). ``quadrants``: :func:`quadrant_summary`.
    """
    etas = sorted(float(e) for e in etas)
    if not etas or any(not (e > 0 and np.isfinite(e)) for e in etas):
        raise ValueError(f"etas (η) must be finite numbers > 0; got {etas!r}")
    if eta_ref not in etas:
        raise ValueError(f"eta_ref must be one of etas {etas}; got {eta_ref!r}")
    with single_thread():
        return _verify(instances, n_tokens, seed, etas, eta_ref, baseline, zero_tol)


def _verify(instances, n_tokens, seed, etas, eta_ref, baseline, zero_tol) -> dict:
    t0 = time.perf_counter()
    inst = random_instances(instances, n_tokens, seed, baseline)
    cg = clipped_gradient(inst)
    with torch.no_grad():
        p = predictions(inst, cg, etas)
        forms = {
            "first_order_vanilla": compare(p["exact_vanilla"], p["first_order_vanilla"], etas, eta_ref, zero_tol),
            "first_order_natural": compare(p["exact_natural"], p["first_order_natural"], etas, eta_ref, zero_tol),
            "paper_natural": compare(p["exact_natural"], p["paper_natural"], etas, eta_ref, zero_tol),
            "paper_vanilla": compare(p["exact_vanilla"], p["paper_vanilla"], etas, eta_ref, zero_tol),
        }
        i = etas.index(eta_ref)
        nat_form, van_exact = p["paper_natural"][i].numpy(), p["exact_vanilla"][i].numpy()
        keep = (np.abs(nat_form) >= zero_tol * eta_ref) & (np.abs(van_exact) >= zero_tol * eta_ref)
        forms["paper_form_on_vanilla_step"] = dict(
            sign_agreement=float(np.mean(np.sign(nat_form[keep]) == np.sign(van_exact[keep]))), counted=int(keep.sum()))
        pooled = compare(torch.cat([p["exact_vanilla"], p["exact_natural"]], 1),
                         torch.cat([p["first_order_vanilla"], p["first_order_natural"]], 1), etas, eta_ref, zero_tol)
        quads = quadrant_summary(inst, cg, eta_ref)
        share_sum = max(abs(float((entropy_shares(log_probs(inst.logits), torch.arange(n_tokens).expand_as(inst.logits),
                                                  log_probs(inst.logits).exp() * inst.advantages * (~cg.clipped),
                                                  eta_ref, pg).sum(-1) - p[f"first_order_{pg}"][i]).abs().max()))
                        for pg in ("vanilla", "natural"))
    return dict(
        instances=instances, n_tokens=n_tokens, seed=seed, baseline=baseline, etas=etas, eta_ref=eta_ref,
        zero_tol=zero_tol,
        sign_agreement=pooled["sign_agreement"], median_rel_error=pooled["median_rel_error"],
        error_slope=pooled["error_slope"], counted=pooled["counted"],
        median_abs_error=pooled["median_abs_error"],
        forms=forms, quadrants=quads,
        clip_frac=float(cg.clipped.to(torch.float64).mul(log_probs(inst.behaviour_logits).exp()).sum(-1).mean()),
        quadrant_sum_error=share_sum,
        seconds=time.perf_counter() - t0,
    )


def explain_update(logits, behaviour_logits, advantages, rule="symmetric", eta: float = 0.1,
                   pg: str = "natural") -> dict:
    """One tabular update of one softmax, token by token (for plots and sliders).

    Args:
        logits, behaviour_logits, advantages: (K,) tensors or lists: z, z_b and A(a).
        rule: a rule object (e.g. ``ClipHigher(eps_low, eps_high)``) or its name.
        eta: step size η.  pg: "natural" (the paper's form) or "vanilla".

    Returns a dict of numpy arrays (K,) — ``pi``, ``ratio``, ``clipped``, ``step`` (Δz),
    ``dH_share`` (each token's share of the first-order ΔH), ``quadrant`` (index into
    QUADRANTS) — and floats: ``c_low``, ``c_high``, ``C``, ``exact`` (H(z + Δz) − H(z)),
    ``first_order`` (−Cov(log π, Δz)), ``paper`` (the paper's form for this pg), and
    ``quadrant_dH`` {quadrant: summed share}.
    """
    if pg not in ("natural", "vanilla"):
        raise ValueError(f"pg must be 'natural' or 'vanilla'; got {pg!r}")
    if not (eta > 0 and np.isfinite(eta)):
        raise ValueError(f"eta (η) must be a finite number > 0; got {eta!r}")
    as_row = lambda x: torch.as_tensor(x, dtype=torch.float64).reshape(1, -1)
    z, zb, adv = as_row(logits), as_row(behaviour_logits), as_row(advantages)
    if not (z.shape == zb.shape == adv.shape) or z.shape[1] < 2:
        raise ValueError(f"logits, behaviour_logits and advantages must be (K,) with K >= 2; got "
                         f"{tuple(z.shape)}, {tuple(zb.shape)}, {tuple(adv.shape)}")
    rule = as_rule(rule)
    inst = Instances(z, zb, adv, adv, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.float64))
    with single_thread():
        cg = clipped_gradient(inst, rules={RULE_NAMES[0]: rule})
        with torch.no_grad():
            p = predictions(inst, cg, [eta])
            log_pi = log_probs(z)
            K = z.shape[1]
            tokens = torch.arange(K)[None]
            weight = log_pi.exp() * adv * (~cg.clipped).to(z.dtype)
            shares = entropy_shares(log_pi, tokens, weight, eta, pg)
            quadrant = quadrant_of(log_pi, tokens, adv, ~cg.clipped, weight=log_probs(zb).exp())
    return dict(
        pi=log_pi.exp()[0].numpy(), ratio=cg.ratio[0].numpy(), clipped=cg.clipped[0].numpy(),
        step=steps(cg.grad, log_pi, [eta])[pg][0, 0].numpy(), dH_share=shares[0].numpy(),
        quadrant=quadrant[0].numpy(), c_low=float(cg.c_low[0]), c_high=float(cg.c_high[0]), C=float(p["C"][0]),
        exact=float(p[f"exact_{pg}"][0, 0]), first_order=float(p[f"first_order_{pg}"][0, 0]),
        paper=float(p[f"paper_{pg}"][0, 0]),
        quadrant_dH={q: float(shares[0][quadrant[0] == i].sum()) for i, q in enumerate(QUADRANTS)},
    )
