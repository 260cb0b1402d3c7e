"""The bandit trained the way a practitioner's trainer consumes a rollout: epochs, mini-batches, a lagging
generator, π_old recorded or recomputed, an entropy bonus, dual-clip (:class:`~toy_rl.practice.schedule.Schedule`).

Rung 1's own loop (:func:`toy_rl.bandit.simulate`) has reuse (epochs) and lag but no mini-batches; this one
adds them and keeps everything else: the same task, the same random streams (rollout j of a seed samples
exactly what :func:`~toy_rl.bandit.simulate` samples for its batch j), the same clipped loss
(:func:`toy_rl.clipping.policy_loss_runs`: min(r·A, clip(r, c_low, c_high)·A), BAPO Eq. 3, with r of Eq. 8,
and dual-clip max(·, c·A) on A < 0 when ``dual_clip`` is set), the same logit step. With the default schedule,
or epochs alone, or lag alone, it reproduces :func:`~toy_rl.bandit.simulate` (tests/test_practice_loop.py).

A mini-batch takes G / minibatches answers of every context's group; the advantages are computed once per
rollout on the whole group (as verl and TRL do before splitting). Answers are one token (``answer_len`` 1).

Per update and per seed it records (names as :func:`~toy_rl.bandit.simulate`'s where it has them): entropy,
expected_reward, best_prob, best_found (after the update), every stat of policy_loss_runs (clip_frac_low,
clip_frac_high, clip_frac, dual_clip_frac, ratio_min/max, approx_kl, rho (NaN without gradient-carrying mass), ...: all
measured against π_old),
behaviour_kl (the k3 KL estimate against the policy that *sampled*, which differs from approx_kl only when
π_old is recomputed), data_age, ratio_age, epoch, minibatch, entropy_coef (β used) and grad_norm.
"""
from __future__ import annotations

from collections import defaultdict

import torch

from ..bandit.answers import BanditBatch, sample_batch
from ..bandit.config import BanditConfig
from ..bandit.policy import best_found, best_prob, expected_reward, log_probs, probs
from ..bandit.simulate import BanditRun, check_seeds
from ..bandit.rewards import make_task
from ..bandit.update import logit_step
from ..clipping import make_rule, policy_loss_runs
from ..clipping.loss import clamped_log_ratio
from ..rl.config import rule_label
from ..threads import single_thread
from .entropy_bonus import EntropyBonus, mean_entropy
from .schedule import Schedule, position


def _check(config: BanditConfig, schedule: Schedule) -> None:
    if config.max_len != 1:
        raise ValueError("the practice loop trains one-token answers (answer_len 1, length_ratio 1)")
    if config.staleness != 0:
        raise ValueError("set the staleness through the Schedule (epochs, minibatches, lag), not config.staleness")
    if config.group_size % schedule.minibatches:
        raise ValueError(f"group_size {config.group_size} must be a multiple of minibatches {schedule.minibatches}")


def _columns(batch: BanditBatch, old_logp: torch.Tensor, mb: int, size: int):
    """Mini-batch ``mb``: answers mb·size ... (mb + 1)·size − 1 of every group."""
    cols = slice(mb * size, (mb + 1) * size)
    return batch.tokens[..., cols], old_logp[..., cols], batch.old_logp[..., cols], batch.advantages[..., cols]


def clipped_step(z: torch.Tensor, tokens, old_logp, adv, rule, dual_clip=None):
    """∂J/∂z of the clipped surrogate on one mini-batch (one run per seed), and policy_loss_runs' stats.

    J = S × the token-mean surrogate, as in :func:`toy_rl.bandit.update.surrogate_gradient`: the sum over
    contexts of each context's mean over its answers in the mini-batch."""
    rule = make_rule(rule) if isinstance(rule, str) else rule
    n, S, g = tokens.shape
    z = z.detach().requires_grad_(True)
    logp = log_probs(z).gather(-1, tokens)
    flat = lambda t: t.reshape(n, S * g, 1)
    loss, stats = policy_loss_runs(flat(logp), flat(old_logp), adv.reshape(n, S * g), torch.ones_like(flat(logp)),
                                   rule, dual_clip=dual_clip)
    (grad,) = torch.autograd.grad(-loss.sum() * S, (z,))
    return grad, stats, logp.detach()


def train(config: BanditConfig = BanditConfig(), rule="symmetric", seeds=range(8), schedule: Schedule = Schedule(),
          bonus: EntropyBonus = EntropyBonus(), dual_clip: float | None = None) -> BanditRun:
    """``config.steps`` optimizer updates of the bandit under ``schedule``, all ``seeds`` side by side.

    Returns a :class:`~toy_rl.bandit.simulate.BanditRun` (``metrics[name]`` is (seeds, steps); ``extra`` holds
    the schedule, the bonus and dual_clip)."""
    rule = make_rule(rule) if isinstance(rule, str) else rule
    seeds = check_seeds(seeds)
    _check(config, schedule)
    with single_thread():
        return _train(config, rule, seeds, schedule, bonus, dual_clip)


def _train(config, rule, seeds, schedule, bonus, dual_clip) -> BanditRun:
    dtype = config.torch_dtype
    task = make_task(config.preset, config.n_tokens, config.n_contexts, config.task_seed, dtype)
    n, S, K, G = len(seeds), config.n_contexts, config.n_tokens, config.group_size
    size = G // schedule.minibatches
    z = task.init_logits.expand(n, S, K).clone()
    initial = dict(entropy=mean_entropy(z), expected_reward=expected_reward(z, task.reward_mean).mean(-1))
    starts = []                                    # logits at the start of each rollout's updates (the last lag + 1)
    coef = torch.full((n,), float(bonus.coef), dtype=dtype)
    records = defaultdict(list)
    for t in range(config.steps):
        where = position(t, schedule)
        if t % schedule.updates_per_rollout == 0:
            starts = (starts + [z])[-(schedule.lag + 1):]
            behaviour = starts[0] if where.rollout >= schedule.lag else task.init_logits.expand(n, S, K)
            batch = sample_batch(task, behaviour, seeds, where.rollout, G, config.advantage)
            old_all = log_probs(z).gather(-1, batch.tokens) if schedule.recompute_old else batch.old_logp
        tokens, old, sampled, adv = _columns(batch, old_all, where.minibatch, size)
        grad, stats, logp = clipped_step(z, tokens, old, adv, rule, dual_clip)
        H = mean_entropy(z)
        beta = bonus.applied(coef, H)
        if bonus.adaptive or bonus.coef:
            grad = grad + bonus.gradient(z, beta)
        z_next = z + logit_step(grad, probs(z), config.lr, config.pg)
        with torch.no_grad():
            log_b = clamped_log_ratio(logp, sampled)
            rec = dict(entropy=mean_entropy(z_next), expected_reward=expected_reward(z_next, task.reward_mean).mean(-1),
                       best_prob=best_prob(z_next, task.correct).mean(-1), best_found=best_found(z_next, task.correct),
                       behaviour_kl=(log_b.exp() - 1 - log_b).mean((1, 2)), grad_norm=grad.pow(2).sum((1, 2)).sqrt(),
                       entropy_coef=beta, **{k: v.to(dtype) for k, v in stats.items()})
            empty = (stats["pos_mass"] + stats["neg_mass"]) == 0      # no gradient-carrying mass: ρ undefined
            for key in ("rho", "rho_before", "pos_neg_ratio"):
                rec[key] = torch.where(empty, torch.nan, rec[key])
            for key in ("data_age", "ratio_age", "epoch", "minibatch"):
                rec[key] = torch.full((n,), float(getattr(where, key)), dtype=dtype)
            for key, v in rec.items():
                records[key].append(v)
        coef = bonus.next_coef(coef, H)
        z = z_next
    metrics = {key: torch.stack(v, 1).cpu().numpy() for key, v in records.items()}
    return BanditRun(config, rule_label(rule), seeds, metrics, {k: v.cpu().numpy() for k, v in initial.items()}, z,
                     extra=dict(task=task, rule_obj=rule, schedule=schedule, bonus=bonus, dual_clip=dual_clip))
