"""What the rung-1 notebooks compute for their figures and sliders, beyond the library's runs: one readable
softmax (notebook 01's sliders), every rule on the *same* random instances (the one-step version of the paper's
Fig. 7), the sign panels of the Entropy-Clip Rule, and the short runs behind notebook 02's sliders.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..threads import single_thread
from .config import BanditConfig
from .entropy_rule import RULE_NAMES, ZERO_TOL, clipped_gradient, predictions, quadrant_summary, random_instances
from .experiments import per_seed_summary
from .policy import log_probs
from .simulate import simulate
from ..clipping import BAPO, ClipHigher, Symmetric


def demo_instance() -> dict:
    """One readable softmax over K = 8 tokens for the notebook-01 sliders.

    The behaviour policy sampled with logits ``behaviour_logits``; the current policy has drifted
    (ratios from about 0.65 to 2.4: at [0.8, 1.2] three tokens are clipped); graded rewards; advantages
    A = R − E_π[R] centred on the current policy (the paper's setting, so C = −E_π[A·X] holds).
    Returns tensors (K,) by name.
    """
    zb = torch.tensor([2.0, 1.4, 1.0, 0.6, 0.2, -0.3, -0.8, -1.4], dtype=torch.float64)
    ratio = torch.tensor([0.85, 1.1, 0.9, 1.15, 0.65, 1.6, 1.0, 2.4], dtype=torch.float64)   # before renormalising
    z = zb + ratio.log()
    rewards = torch.tensor([0.1, 0.9, 0.3, 0.6, 0.0, 1.0, 0.2, 0.8], dtype=torch.float64)
    pi = torch.softmax(z, -1)
    return dict(logits=z, behaviour_logits=zb, rewards=rewards, advantages=rewards - (pi * rewards).sum())


def same_instances(rules: dict, instances: int = 10_000, n_tokens: int = 16, seed: int = 0,
                   eta: float = 1e-2) -> dict:
    """Every rule applied to the *same* random instances (``verify`` gives each instance one random rule).

    ``rules``: {name: rule object}, e.g. fixed bounds for the one-step version of the paper's Fig. 7 claim.
    Returns {name: row}, each row as in ``verify(...)["quadrants"]`` (c_low, c_high, and per quadrant dH_natural,
    dH_vanilla, share, clip_frac) plus the exact one-step ΔH averaged over the instances (``exact_natural``,
    ``exact_vanilla``), its first-order prediction (``first_order_natural``, ``first_order_vanilla``: the
    quadrants' dH add up to it), the clipped share of all tokens (``clip_frac``, π_b-weighted) and
    ``per_instance``: the exact ΔH of every instance (``exact_natural``, ``exact_vanilla``; the same instances
    in the same order for every rule, so rules can be compared instance by instance), its bounds (``c_low``,
    ``c_high``) and, for a rule that searches, ρ before its search (``rho_before``).
    """
    with single_thread():
        inst = random_instances(instances, n_tokens, seed)
        inst = inst._replace(rule=torch.zeros_like(inst.rule))           # every instance uses rule slot 0
        pi_b = log_probs(inst.behaviour_logits).exp()
        weighted_adv = n_tokens * pi_b * inst.advantages                   # as clipped_gradient weighs them
        slot = RULE_NAMES[0]
        out = {}
        for name, rule in rules.items():
            cg = clipped_gradient(inst, rules={slot: rule})
            with torch.no_grad():
                p = predictions(inst, cg, [eta])
            row = quadrant_summary(inst, cg, eta)[slot]
            row.update(exact_natural=float(p["exact_natural"].mean()), exact_vanilla=float(p["exact_vanilla"].mean()),
                       first_order_natural=float(p["first_order_natural"].mean()),
                       first_order_vanilla=float(p["first_order_vanilla"].mean()),
                       clip_frac=float((pi_b * cg.clipped).sum(-1).mean()))
            each = dict(exact_natural=p["exact_natural"][0].numpy(), exact_vanilla=p["exact_vanilla"][0].numpy(),
                        c_low=cg.c_low.numpy(), c_high=cg.c_high.numpy())
            if hasattr(rule, "search"):
                path = rule.search(cg.ratio, weighted_adv, torch.ones_like(cg.ratio))["rho_path"]
                each["rho_before"] = path[:, 0].numpy()
            row["per_instance"] = each
            out[name] = row
    return out


def sign_panels(instances: int = 10_000, n_tokens: int = 16, seed: int = 0, eta: float = 1e-2,
                baseline: str = "current") -> dict:
    """Predicted against exact ΔH on ``verify``'s random instances (same seed, same instances), at one η.

    {panel: dict(step, exact, predicted, label, counted, agree)} for "paper_natural" (natural step vs the printed
    form −η·Cov(log π, A·X + C)), "paper_vanilla" (vanilla step vs −η·Cov(log π, π·(A·X + C))) and
    "paper_form_on_vanilla_step" (vanilla step vs the printed form: only its sign can be compared). ``counted``
    marks the instances ``verify`` counts (prediction not ~0; for the last panel, neither side ~0) and ``agree``
    is the sign agreement over them, so the numbers equal ``verify``'s report.
    """
    with single_thread():
        inst = random_instances(instances, n_tokens, seed, baseline)
        cg = clipped_gradient(inst)
        with torch.no_grad():
            p = predictions(inst, cg, [eta])
    panels = {
        "paper_natural": ("natural step", "exact_natural", "paper_natural", "−η·Cov(log π, A·X + C)  (printed form)"),
        "paper_vanilla": ("vanilla step", "exact_vanilla", "paper_vanilla", "−η·Cov(log π, π·(A·X + C))"),
        "paper_form_on_vanilla_step": ("vanilla step", "exact_vanilla", "paper_natural",
                                       "−η·Cov(log π, A·X + C)  (printed form)"),
    }
    lin = ZERO_TOL * eta
    out = {}
    for key, (step, exact_key, pred_key, label) in panels.items():
        e, q = p[exact_key][0].numpy(), p[pred_key][0].numpy()
        counted = np.abs(q) >= lin
        if key == "paper_form_on_vanilla_step":
            counted &= np.abs(e) >= lin
        out[key] = dict(step=step, exact=e, predicted=q, label=label, counted=counted,
                        agree=float(np.mean(np.sign(e[counted]) == np.sign(q[counted]))))
    return out


def quick_runs(staleness: int, rho0: float = 0.4, config: BanditConfig | None = None, seeds=range(8),
               steps: int = 150) -> dict:
    """What notebook 02's sliders run: symmetric, clip-higher and BAPO(rho0) at one staleness, a short run.
    Returns {rule name: BanditRun}."""
    config = replace(config or BanditConfig(), staleness=int(staleness), steps=int(steps))
    rules = {"symmetric": Symmetric(), "clip-higher": ClipHigher(), "bapo": BAPO(rho0=float(rho0))}
    return {name: simulate(config, rule, seeds) for name, rule in rules.items()}


def quick_summary(runs: dict) -> dict:
    """Per rule of :func:`quick_runs`: the mean reward over updates, the final entropy, the mean bounds and ρ
    (means over seeds, rounded for the slider's printout)."""
    out = {}
    for name, run in runs.items():
        s = per_seed_summary(run)
        out[name] = dict(mean_reward=round(float(s["mean_reward"].mean()), 4),
                         final_entropy=round(float(s["final_entropy"].mean()), 4),
                         c_low=round(float(s["c_low"].mean()), 3), c_high=round(float(s["c_high"].mean()), 3),
                         rho=round(float(np.nanmean(s["rho"])), 3))
    return out
