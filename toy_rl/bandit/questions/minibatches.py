"""Question 2, "clip_ratio_high does nothing with one PPO epoch" (verl-project/verl#791,
BytedTsinghua-SIA/DAPO#11): one epoch is not one update. A rollout split into mini-batches is consumed by
several optimizer steps, and every mini-batch after the first is scored by a policy that has already moved.

verl with ``ppo_epochs=1`` and ``ppo_mini_batch_size`` < ``train_batch_size`` (DAPO's recipe: 16 mini-batches
per rollout) takes train_batch_size / ppo_mini_batch_size steps per rollout. Mini-batch m of the epoch is m
updates stale: r (Eq. 8) differs from 1 there, the surrogate min(r·A, clip(r, c_low, c_high)·A) (Eq. 3) can
clip, and c_high = 1.28 against 1.2 changes which positive tokens keep their gradient. With one mini-batch
the rules coincide exactly.

Here: the bandit with one epoch and 1, 2, 4 or 8 mini-batches (each takes G / n answers of every group), the
symmetric rule against clip-higher on the same seeds.
"""
from __future__ import annotations

import numpy as np

from ..config import BanditConfig
from ..schedule import Schedule
from ..simulate import simulate


def minibatch_experiment(config: BanditConfig = BanditConfig(), seeds=range(8), minibatches=(1, 2, 4, 8),
                         rules=("symmetric", "clip-higher")) -> dict:
    """Returns ``{"runs": {(n, rule): BanditRun}, "rows": {label: numbers}, "profiles": {n: array}}``.

    ``profiles[n][m]``: the first rule's mean ``clip_frac_high`` (A > 0 tokens above c_high) on mini-batch m.
    Rows, per n: ``high_first`` / ``high_later`` (that fraction on mini-batch 0 / on the others),
    ``updates_clipping_high`` (share of updates with any positive token clipped), ``rule_gap`` (largest
    entropy difference between the two rules, every update and seed: 0 means the same run) and the final
    entropy and mean expected reward over training of each rule (``H_<rule>``, ``R_<rule>``)."""
    runs = {(n, r): simulate(config, r, seeds, schedule=Schedule(minibatches=n)) for n in minibatches for r in rules}
    rows, profiles = {}, {}
    for n in minibatches:
        m = runs[n, rules[0]].metrics
        mb, high = m["minibatch"], m["clip_frac_high"]
        profiles[n] = np.array([high[mb == k].mean() for k in range(n)])
        row = dict(high_first=float(high[mb == 0].mean()),
                   high_later=float(high[mb > 0].mean()) if n > 1 else float("nan"),
                   updates_clipping_high=float((high > 0).mean()),
                   rule_gap=max(float(np.abs(runs[n, r].metrics["entropy"] - m["entropy"]).max()) for r in rules))
        for r in rules:
            row[f"H_{r}"] = float(runs[n, r].final("entropy").mean())
            row[f"R_{r}"] = float(runs[n, r].metrics["expected_reward"].mean())
        rows[f"{n} mini-batch{'es' if n > 1 else ''}"] = row
    return dict(runs=runs, rows=rows, profiles=profiles)
