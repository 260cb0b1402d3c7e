"""Question 1, "clip ratio is always 0" (huggingface/trl#3120, #3757): with one update per rollout π_old is
the policy being trained, so r ≡ 1 and nothing can be clipped; the loss still trains.

With TRL's default ``num_iterations=1`` the ratio r = π_θ / π_old (BAPO Eq. 8's r) compares the policy with
itself: exactly 1 on every token, inside every [c_low, c_high], so every clip fraction is 0 and symmetric,
clip-higher and BAPO give the same run. The surrogate min(r·A, clip(r)·A) (Eq. 3) is then r·A with gradient
∂(r·A)/∂log π = r·A = A: the plain policy gradient (GRPO's, REINFORCE with a group baseline). A second pass
over the same rollout (``num_iterations=2``, PPO epochs) is the first place where r moves away from 1.
"""
from __future__ import annotations

import numpy as np
import torch

from ...clipping import as_rule
from ..answers import sample_batch
from ..config import BanditConfig
from ..policy import log_probs
from ..rewards import make_task
from ..schedule import Schedule
from ..simulate import simulate
from ..update import surrogate_gradient


def clip_ratio_experiment(config: BanditConfig = BanditConfig(), seeds=range(8), epochs=(1, 2, 4),
                          rules=("symmetric", "clip-higher")) -> dict:
    """Train the bandit with 1, 2, 4 passes per rollout (TRL's num_iterations) under each rule.

    Returns ``{"runs": {(epochs, rule): BanditRun}, "rows": {label: numbers}}``; per epochs value, for the
    first rule: ``max_r_minus_1_fresh`` (largest |r − 1| on updates whose π_old is the current policy),
    ``clip_frac_fresh`` / ``clip_frac_reused`` (mean clip fraction on those updates / on the later passes),
    ``updates_clipping`` (share of updates with any token clipped), ``reward_start`` / ``reward_end``
    (expected reward before / after training, mean over seeds) and ``rule_gap`` (the largest entropy
    difference between the rules over all updates and seeds: 0 means they gave the same run)."""
    runs = {(e, r): simulate(config, r, seeds, schedule=Schedule(epochs=e)) for e in epochs for r in rules}
    rows = {}
    for e in epochs:
        run = runs[e, rules[0]]
        m = run.metrics
        fresh = m["ratio_age"] == 0
        dev = np.maximum(np.abs(m["ratio_max"] - 1), np.abs(m["ratio_min"] - 1))
        gap = max(float(np.abs(runs[e, r].metrics["entropy"] - m["entropy"]).max()) for r in rules)
        rows[f"epochs {e}"] = dict(
            max_r_minus_1_fresh=float(dev[fresh].max()),
            clip_frac_fresh=float(m["clip_frac"][fresh].mean()),
            clip_frac_reused=float(m["clip_frac"][~fresh].mean()) if (~fresh).any() else float("nan"),
            updates_clipping=float((m["clip_frac"] > 0).mean()),
            reward_start=float(run.initial["expected_reward"].mean()),
            reward_end=float(run.final("expected_reward").mean()),
            rule_gap=gap)
    return dict(runs=runs, rows=rows)


def gradient_at_ratio_one(config: BanditConfig = BanditConfig(), seed: int = 0, rule="symmetric") -> dict:
    """On the first rollout of ``seed`` (sampled by the current policy, so r ≡ 1), the clipped loss's logit
    gradient against the plain policy gradient ∂/∂z [S · mean(A · log π)]. Returns ``{"max_abs_gap",
    "grad_norm", "max_abs_ratio_gap"}``: the gap is at round-off level when the two are the same."""
    task = make_task(config.preset, config.n_tokens, config.n_contexts, config.task_seed, config.torch_dtype)
    z = task.init_logits[None].clone()
    batch = sample_batch(task, z, [seed], 0, config.group_size, config.advantage)
    grad = surrogate_gradient(z, batch, as_rule(rule))[0]
    logp = log_probs(z).gather(-1, batch.tokens)
    zz = z.clone().requires_grad_(True)
    pg = config.n_contexts * (batch.advantages * log_probs(zz).gather(-1, batch.tokens)).mean()
    (vanilla,) = torch.autograd.grad(pg, (zz,))
    return dict(max_abs_gap=float((grad - vanilla).abs().max()), grad_norm=float(vanilla.norm()),
                max_abs_ratio_gap=float((logp - batch.old_logp).exp().sub(1).abs().max()))
