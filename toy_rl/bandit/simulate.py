"""The bandit training loop: sample groups, score them, update the logits through the clipped loss.

All seeds run side by side: logits are (seeds, S, K) and every step is a few
tensor operations over all seeds at once (no Python loop over seeds); each seed
is one "run" of :func:`toy_rl.clipping.policy_loss_runs`, so BAPO searches its
bounds for each seed separately. Random numbers come from :mod:`.rng`, so the
trajectory of seed 3 is the same whether it runs alone or among 20.

Off-policy scenarios (DESIGN.md), with k = config.staleness:

    "reuse"  one sampled batch serves E = k + 1 updates (PPO epochs): the j-th
             update on a batch sees data j updates old (j = 0, ..., k).
    "lag"    a fresh batch every update, sampled by the policy of k updates ago
             (asynchronous generation), kept in a ring buffer of the last k + 1
             logits; the first k updates use the initial policy.

k = 0 is on-policy in both modes: the ratio is exactly 1 and the three rules
give the same trajectory. The ratio always uses the behaviour log-probs
recorded when the batch was sampled.

Per update and per seed the run records (names as in DESIGN.md / TRL):
entropy and expected_reward (exact, mean over contexts, after the update),
entropy_change (exact) and entropy_change_first_order (−Cov(log π, Δz)),
sample_reward, grad_norm (of the logit gradient), staleness (age of the batch),
rollout (how many batches were sampled so far: × S·G = samples seen), ratio_std,
every stat of policy_loss_runs (c_low, c_high, rho, rho_before, clip_frac_low,
clip_frac_high, pos_mass, neg_mass, neg_adv_frac, ratio_min/max, approx_kl, ...;
ρ is NaN for a batch with no gradient-carrying advantage mass),
and per quadrant (see :mod:`.quadrants`) dH_<q>, clip_frac_<q> and share_<q>.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch
from tqdm.auto import tqdm

from ..clipping import make_rule
from ..clipping.loss import LOG_RATIO_CLAMP
from ..advantages import group_advantages
from .config import BanditConfig
from .policy import entropy, expected_reward, log_probs, sample_tokens
from .quadrants import QUADRANTS, entropy_shares, quadrant_of, split_by_quadrant
from .rewards import Task, draw_rewards, make_task
from .rng import ACTIONS, REWARDS, uniforms
from ..threads import single_thread
from .update import logit_step, surrogate_gradient


class Batch(NamedTuple):
    tokens: torch.Tensor      # (seeds, S, G) sampled tokens
    old_logp: torch.Tensor    # (seeds, S, G) behaviour log-probs, recorded at sampling time
    rewards: torch.Tensor     # (seeds, S, G)
    advantages: torch.Tensor  # (seeds, S, G)


@dataclass
class BanditRun:
    """What :func:`simulate` returns. ``metrics[name]`` is a numpy array (seeds, steps);
    ``initial`` holds entropy and expected_reward before the first update, (seeds,)."""
    config: BanditConfig
    rule: str
    seeds: list
    metrics: dict
    initial: dict
    final_logits: torch.Tensor
    logits_history: torch.Tensor | None = None      # (steps + 1, seeds, S, K) with keep_logits=True
    behaviour_history: torch.Tensor | None = None   # (steps, seeds, S, K): who sampled update t's batch
    extra: dict = field(default_factory=dict)

    def curve(self, name: str, with_initial: bool = False) -> np.ndarray:
        """(seeds, steps) values of a metric; with_initial prepends the step-0 value (entropy, expected_reward)."""
        values = self.metrics[name]
        if with_initial:
            values = np.concatenate([self.initial[name][:, None], values], axis=1)
        return values

    def final(self, name: str) -> np.ndarray:
        """(seeds,) the metric after the last update."""
        return self.metrics[name][:, -1]


def check_seeds(seeds) -> list:
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or not 0 <= s < 2 ** 62:
            raise ValueError(f"seeds must be integers in [0, 2**62); got {s!r}")
    return [int(s) for s in seeds]


def sample_batch(task: Task, behaviour_logits: torch.Tensor, seeds: list, rollout: int,
                 group_size: int, advantage: str) -> Batch:
    """Sample G tokens per context from the behaviour policy, score them, compute advantages."""
    n_seeds, S, _ = behaviour_logits.shape
    dtype = behaviour_logits.dtype
    u = uniforms(seeds, ACTIONS, rollout, (S, group_size), dtype)
    tokens = sample_tokens(behaviour_logits, u)
    old_logp = log_probs(behaviour_logits).gather(-1, tokens)
    u_reward = uniforms(seeds, REWARDS, rollout, (S, group_size), dtype) if task.bernoulli else None
    rewards = draw_rewards(task, tokens, u_reward)
    return Batch(tokens, old_logp, rewards, group_advantages(rewards, advantage))


def simulate(config: BanditConfig = BanditConfig(), rule="symmetric", seeds=range(20),
             progress: bool = False, keep_logits: bool = False) -> BanditRun:
    """Train the tabular softmax policy for ``config.steps`` updates, all ``seeds`` at once.

    Args:
        config: a :class:`BanditConfig`.
        rule: a rule object (Symmetric(), ClipHigher(), BAPO(...)) or its name.
        seeds: the seeds to run, side by side.
        progress: show a tqdm bar on stderr.
        keep_logits: also return every logits tensor and the behaviour logits of every update.
    """
    rule = make_rule(rule) if isinstance(rule, str) else rule
    seeds = check_seeds(seeds)
    with single_thread():
        return _simulate(config, rule, seeds, progress, keep_logits)


def _simulate(config: BanditConfig, rule, seeds: list, progress: bool, keep_logits: bool) -> BanditRun:
    dtype = config.torch_dtype
    task = make_task(config.preset, config.n_tokens, config.n_contexts, config.task_seed, dtype)
    n, S, K, G = len(seeds), config.n_contexts, config.n_tokens, config.group_size
    k, E, lr = config.staleness, config.updates_per_batch, config.lr

    z = task.init_logits.expand(n, S, K).clone()
    initial = dict(entropy=entropy(z).mean(-1), expected_reward=expected_reward(z, task.reward_mean).mean(-1))
    ring = z.expand(k + 1, n, S, K).clone() if config.mode == "lag" else None   # z_{t-k}, ..., z_t
    history, behaviours = ([z.clone()], []) if keep_logits else (None, None)
    records = defaultdict(list)

    bar = tqdm(range(config.steps), disable=not progress, file=sys.stderr, leave=False,
               desc=f"{rule.name} k={k}", mininterval=0.5)
    for t in bar:
        # 1. the batch: fresh, or the previous one again (reuse), sampled by z_t or z_{t-k} (lag)
        if config.mode == "reuse":
            age = t % E
            if age == 0:
                behaviour = z
                batch = sample_batch(task, behaviour, seeds, t // E, G, config.advantage)
        else:
            ring[t % (k + 1)] = z
            behaviour = ring[(t - k) % (k + 1)]            # slot last written at t - k (z_0 while t < k)
            age = min(t, k)
            batch = sample_batch(task, behaviour, seeds, t, G, config.advantage)
        if keep_logits:
            behaviours.append(behaviour.clone())

        # 2. the update, through the shared clipped loss
        grad_z, grad_logp, stats = surrogate_gradient(z, batch.tokens, batch.old_logp, batch.advantages, rule)
        logp_all = log_probs(z)
        step = logit_step(grad_z, logp_all.exp(), lr, config.pg)
        z_next = z + step

        # 3. diagnostics
        with torch.no_grad():
            logp = logp_all.gather(-1, batch.tokens)
            ratio = torch.exp(torch.clamp(logp - batch.old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
            adv = batch.advantages
            clipped = ((adv > 0) & (ratio > stats["c_high"][:, None, None])) | \
                      ((adv < 0) & (ratio < stats["c_low"][:, None, None]))
            shares = entropy_shares(logp_all, batch.tokens, grad_logp, lr, config.pg) / S
            quadrant = quadrant_of(logp_all, batch.tokens, adv, ~clipped)
            quads = split_by_quadrant(quadrant.reshape(n, -1), shares.reshape(n, -1), clipped.reshape(n, -1))
            h_next = entropy(z_next).mean(-1)
            rec = dict(
                entropy=h_next,
                expected_reward=expected_reward(z_next, task.reward_mean).mean(-1),
                entropy_change=h_next - entropy(z).mean(-1),
                entropy_change_first_order=shares.sum((1, 2)),
                sample_reward=batch.rewards.mean((1, 2)),
                grad_norm=grad_z.pow(2).sum((1, 2)).sqrt(),
                staleness=torch.full((n,), float(age), dtype=dtype),
                rollout=torch.full((n,), float(t // E + 1 if config.mode == "reuse" else t + 1), dtype=dtype),
                ratio_std=ratio.reshape(n, -1).std(1),
                **{key: v.to(dtype) for key, v in stats.items()},
            )
            # no gradient-carrying advantage mass at all (every group all right or all wrong, or every
            # token with A != 0 clipped): ρ is undefined, recorded as NaN instead of the core's placeholder
            empty = (stats["pos_mass"] + stats["neg_mass"]) == 0
            for key in ("rho", "rho_before", "pos_neg_ratio"):
                rec[key] = torch.where(empty, torch.nan, rec[key])
            for i, q in enumerate(QUADRANTS):
                for what in ("dH", "clip_frac", "share"):
                    rec[f"{what}_{q}"] = quads[what][:, i]
            for key, v in rec.items():
                records[key].append(v)
        z = z_next
        if keep_logits:
            history.append(z.clone())

    metrics = {key: torch.stack(v, 1).cpu().numpy() for key, v in records.items()}
    return BanditRun(config, rule.name, seeds, metrics, {key: v.cpu().numpy() for key, v in initial.items()}, z,
                     torch.stack(history) if keep_logits else None,
                     torch.stack(behaviours) if keep_logits else None,
                     dict(task=task, rule_obj=rule))
