"""Rung 2's backend for :mod:`toy_rl.experiments`: the small arithmetic transformer under the shared loop.

    from toy_rl.experiments import grid, sweep, summarize, format_table
    results = sweep(grid("arithmetic", "add", stalenesses=(0, 4), seeds=range(3)))
    print(format_table(summarize(results)))

Every run starts from the same cached supervised warm start (:func:`toy_rl.arithmetic.warmstart.load_warmstart`;
the ``warmstart`` option, default the task's own, the tiny one with ``smoke``) and goes through the shared loop
(:func:`toy_rl.rl.loop.train`); only the rollout seed changes between seeds. Runs live in
``<out>/arithmetic-<task>/<scenario>/<rule>/seed<k>/`` (:mod:`toy_rl.experiments.layout`).
"""
from __future__ import annotations

import torch

from ..clipping import make_rule
from ..experiments.spec import RULES
from ..rl.loop import RLConfig, train as train_loop
from .policy import TinyPolicy
from .tasks import get_task
from .warmstart import load_warmstart, smoke_config

# Tuned once for learning on the warm-started "add" model, then fixed for every rule:
# lr 1e-3 wrecked the warm start after a few updates, 3e-4 improved it.
DEFAULTS = dict(steps=200, prompts=16, group_size=8, lr=3e-4, eval_every=25, eval_size=200, checkpoint_every=50)
# Smoke: the tiny warm start (1 layer, d_model 32; cached after the first use) and a few updates.
SMOKE = dict(steps=6, prompts=4, group_size=4, eval_every=3, eval_size=16, checkpoint_every=3)
# The backend's own settings: the WarmstartConfig of the starting model (None: the task's own).
OPTIONS = {"warmstart": None}


def rl_defaults(task, preset=None) -> dict:
    """RL settings the task decides: room for its longest answer plus the end token."""
    return {"max_new_tokens": task.max_answer_chars + 1}


def warmstart_of(spec):
    """The spec's warm-start config: its ``warmstart`` option, else the tiny one for smoke runs, else None
    (the task's own)."""
    chosen = spec.option("warmstart")
    return chosen if chosen is not None or not spec.smoke else smoke_config(get_task(spec.task))


def train(spec, folder) -> list[dict]:
    """One RL run of ``spec`` from the warm start, in ``folder`` (resumes from its checkpoint)."""
    task = get_task(spec.task)
    policy = TinyPolicy(load_warmstart(task, warmstart_of(spec), device=spec.device, progress=spec.progress))
    return train_loop(spec.rl, policy, task, folder, resume=spec.resume, progress=spec.progress)


def entropy_check(task: str = "add", rules=RULES, stale_updates: int = 3, lr: float = 1e-2, seed: int = 0,
                  device="auto", warmstart=None, progress: bool = False) -> dict:
    """The Entropy-Clip Rule on the warm-started transformer (see :mod:`toy_rl.rl.entropy_check`).

    Samples one batch (16 prompts × 8 answers), makes it stale by ``stale_updates`` updates on it
    (symmetric rule, lr 3e-4), then for each rule takes one SGD step of size ``lr`` on a copy and
    compares the measured entropy change at every answer position with −Cov(log π, Δz).
    Returns {rule: report} plus ``"error_slope"`` (log-log slope of the error against η, for BAPO).
    """
    from ..rl.entropy_check import entropy_rule_check, error_slope
    from ..rl.loop import make_optimizer, update
    from ..rl.sources import BatchSource

    t = get_task(task)
    torch.manual_seed(seed)
    policy = TinyPolicy(load_warmstart(t, warmstart, device=device, progress=progress))
    batch = BatchSource(policy, t, 16, 8, t.max_answer_chars + 1, seed=seed).next(0)
    cfg = RLConfig(lr=3e-4)
    opt = make_optimizer(policy, cfg.lr)
    for _ in range(stale_updates):
        update(policy, opt, batch, make_rule("symmetric"), cfg)
    out = {r: entropy_rule_check(policy.model, batch, make_rule(r), lr) for r in rules}
    out["error_slope"] = error_slope(policy.model, batch, make_rule(rules[-1]))
    return out
