"""The bandit training loop: sample groups, score them, update the logits through the clipped loss.

All seeds run side by side: logits are (seeds, S, K) and every step is a few
tensor operations over all seeds at once (no Python loop over seeds); each seed
is one "run" of :func:`toy_rl.clipping.policy_loss_runs`, so BAPO searches its
bounds for each seed separately. Random numbers come from :mod:`.rng`, so the
trajectory of seed 3 is the same whether it runs alone or among 20.

Off-policy scenarios (docs/protocol.md, section 4), with k = config.staleness:

    "reuse"  one sampled batch serves E = k + 1 updates (PPO epochs): the j-th
             update on a batch sees data j updates old (j = 0, ..., k).
    "lag"    a fresh batch every update, sampled by the policy of k updates ago
             (asynchronous generation), kept in a ring buffer of the last k + 1
             logits; the first k updates use the initial policy.

k = 0 is on-policy in both modes: the ratio is exactly 1 and the three rules
give the same trajectory. The ratio uses the behaviour log-probs recorded when
the batch was sampled.

Both scenarios are schedules (:class:`~toy_rl.bandit.schedule.Schedule`: reuse is k + 1 epochs, lag a lag of k),
and ``simulate(..., schedule=...)`` takes any other one, the knobs of a practitioner's trainer (notebook 07):
epochs × mini-batches per rollout, a lagging generator, π_old recomputed by the trainer (verl's
``compute_log_prob``); with ``bonus`` an entropy bonus β·H (:mod:`.entropy_bonus`), with ``dual_clip`` the
loss of A < 0 tokens capped at c·|A|. The default schedule reproduces the config's scenario bit for bit.

Answers are one token by default; with ``config.answer_len`` / ``length_ratio``
they are several (:mod:`.answers`): the decision token from the logits z, the
rest from a continuation table w trained by the same token-mean loss (both lag
together in "lag" mode). Entropy, expected reward and the quadrants stay those
of the decision distribution softmax(z).

Per update and per seed the run records (names as in TRL where TRL has one):
entropy and expected_reward (exact, mean over contexts, after the update),
entropy_change (exact) and entropy_change_first_order (−Cov(log π, Δz)),
sample_reward, grad_norm (of the decision logits' gradient), staleness (age of the batch),
rollout (how many batches were sampled so far: × S·G = samples seen), ratio_std, and from the schedule
ratio_age (age of π_old), epoch, minibatch, behaviour_kl (k3 KL of the decision tokens to the policy that
sampled; approx_kl's π_old differs from it only when recomputed) and entropy_coef (β used),
every stat of policy_loss_runs (c_low, c_high, rho, rho_before, clip_frac_low,
clip_frac_high, pos_mass, neg_mass, neg_adv_frac, ratio_min/max, approx_kl, ...;
ρ is NaN for a batch with no gradient-carrying advantage mass),
per quadrant (see :mod:`.quadrants`) dH_<q>, clip_frac_<q> and share_<q>; and for the
pilot gate (:mod:`.pilot`) lambda_mass, rho_start_grad and rho_start_all
(:func:`length_balance`), best_prob (exact probability of the best tokens), best_found and, with
multi-token answers, continuation_entropy. The clip fractions, ρ and KL of
policy_loss_runs are over all answer tokens; ratio_std is over the decision tokens.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm.auto import tqdm

from ..clipping import as_rule, clipped_mask
from ..clipping.loss import LOG_RATIO_CLAMP, clamped_log_ratio, token_ratio
from ..rl.config import rule_label
from ..rl.diagnostics import START, start_balance
from .answers import BanditBatch, Batch, sample_batch  # noqa: F401  (Batch re-exported: it used to live here)
from .config import BanditConfig
from .entropy_bonus import EntropyBonus
from .policy import best_found, best_prob, entropy, expected_reward, log_probs, probs
from .quadrants import QUADRANTS, entropy_shares, quadrant_of, split_by_quadrant
from .rewards import make_task
from .schedule import Schedule, minibatch, position, recompute_old, schedule_of
from ..threads import single_thread
from .update import logit_step, surrogate_gradient

START_BOUNDS = START         # BAPO's starting bounds [a⁻, a⁺] (§5.1): where rho_start_* is measured


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
    cont_history: torch.Tensor | None = None             # the same two for the continuation logits w (answers.py),
    cont_behaviour_history: torch.Tensor | None = None   # with keep_logits=True when answers can be longer than 1

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


def simulate(config: BanditConfig = BanditConfig(), rule="symmetric", seeds=range(20),
             progress: bool = False, keep_logits: bool = False, schedule: Schedule | None = None,
             bonus: EntropyBonus = EntropyBonus(), dual_clip: float | None = None) -> BanditRun:
    """Train the tabular softmax policy for ``config.steps`` updates, all ``seeds`` at once.

    Args:
        config: a :class:`BanditConfig`.
        rule: a rule object (Symmetric(), ClipHigher(), BAPO(...)) or its name.
        seeds: the seeds to run, side by side.
        progress: show a tqdm bar on stderr.
        keep_logits: also return every logits tensor and the behaviour logits of every update (and, with
            multi-token answers, the same for the continuation logits), so that
            :func:`toy_rl.bandit.replay.replay_batches` can rebuild every batch (of a run without ``schedule``).
        schedule: how each rollout is consumed (:class:`~toy_rl.bandit.schedule.Schedule`); None: the one
            ``config.staleness`` and ``config.mode`` name (a schedule needs ``config.staleness`` 0).
        bonus: an entropy bonus (:class:`~toy_rl.bandit.entropy_bonus.EntropyBonus`); the default adds none.
        dual_clip: c > 1 caps the loss of A < 0 tokens at c·|A|; None: off.
    """
    rule = as_rule(rule)
    seeds = check_seeds(seeds)
    schedule = schedule_of(config, schedule)
    with single_thread():
        return _simulate(config, rule, seeds, schedule, bonus, dual_clip, progress, keep_logits)


def _sample(task, behaviour, behaviour_cont, seeds, rollout, answers) -> BanditBatch:
    return sample_batch(task, behaviour, seeds, rollout, answers["G"], answers["advantage"], behaviour_cont,
                        answers["answer_len"], answers["length_ratio"])


def length_balance(logp, old_logp, adv, mask) -> dict:
    """Per run, from the loss inputs (runs, batch, tokens): how long wrong answers tip the loss.

    ``lambda_mass``: λ = Σ_{A<0} |A|·(tokens) / Σ_{A>0} A·(tokens), the wrong answers' tokens over the right
    ones', each weighted by its answer's |A| (docs/protocol.md, section 1; on-policy ρ = 1/(1 + λ));
    NaN with no positive mass. ``rho_start_grad`` / ``rho_start_all``: ρ = pos/(pos + neg) at BAPO's
    starting bounds [0.6, 1.2] with count="grad" / "all" (:mod:`toy_rl.clipping.balance`), i.e. the
    balance BAPO's search sees before it moves; NaN with no mass. The masses are rungs 2 and 3's too
    (:func:`toy_rl.rl.diagnostics.start_balance`).
    """
    runs = mask.shape[0]
    a = adv.reshape(mask.shape[:2] + (-1,)).expand_as(mask)
    s = start_balance(token_ratio(logp, old_logp).reshape(runs, -1), a.reshape(runs, -1), mask.reshape(runs, -1),
                      START_BOUNDS)
    pos, neg = s["pos"], s["neg"]
    lam = torch.where(pos > 0, neg / torch.where(pos > 0, pos, torch.ones_like(pos)), torch.nan)
    return dict(lambda_mass=lam, rho_start_grad=s["rho_start_grad"], rho_start_all=s["rho_start_all"])


def _simulate(config: BanditConfig, rule, seeds: list, schedule: Schedule, bonus: EntropyBonus, dual_clip,
              progress: bool, keep_logits: bool) -> BanditRun:
    dtype = config.torch_dtype
    task = make_task(config.preset, config.n_tokens, config.n_contexts, config.task_seed, dtype)
    n, S, K, G = len(seeds), config.n_contexts, config.n_tokens, config.group_size
    U, lr = schedule.updates_per_rollout, config.lr

    z = task.init_logits.expand(n, S, K).clone()
    w = task.init_logits.expand(n, S, K).clone() if config.max_len > 1 else None   # continuation (answers.py)
    initial = dict(entropy=entropy(z).mean(-1), expected_reward=expected_reward(z, task.reward_mean).mean(-1))
    starts = []                           # (z, w) as each of the last lag + 1 rollouts began: who samples the next
    coef = torch.full((n,), float(bonus.coef), dtype=dtype)                  # β of the entropy bonus, per seed
    history, behaviours = ([z.clone()], []) if keep_logits else (None, None)
    keep_cont = keep_logits and w is not None
    cont_history, cont_behaviours = ([w.clone()], []) if keep_cont else (None, None)
    records = defaultdict(list)
    answers = dict(G=G, advantage=config.advantage, answer_len=config.answer_len, length_ratio=config.length_ratio)

    bar = tqdm(range(config.steps), disable=not progress, file=sys.stderr, leave=False,
               desc=f"{rule.name} {schedule.label()}", mininterval=0.5)
    for t in bar:
        # 1. the batch: a fresh rollout every U = epochs × minibatches updates, sampled by the policy as the rollout
        #    `lag` rollouts back began (z_0 before there was one); update t trains on its mini-batch
        where = position(t, schedule)
        if t % U == 0:
            starts = (starts + [(z, w)])[-(schedule.lag + 1):]
            behaviour, behaviour_w = starts[0]
            sampled = _sample(task, behaviour, behaviour_w, seeds, where.rollout, answers)
            rollout = recompute_old(sampled, z, w) if schedule.recompute_old else sampled   # π_old of the ratio
        batch = minibatch(rollout, where.minibatch, schedule.minibatches)
        if keep_logits:
            behaviours.append(behaviour.clone())
        if keep_cont:
            cont_behaviours.append(behaviour_w.clone())

        # 2. the update, through the shared clipped loss (plus β·∂H/∂z with an entropy bonus)
        grad_z, grad_w, grad_logp, stats, loss_tokens = surrogate_gradient(z, batch, rule, w, dual_clip)
        h = entropy(z).mean(-1)
        beta = bonus.applied(coef, h)
        if bonus.adaptive or bonus.coef:
            grad_z = grad_z + bonus.gradient(z, beta)
        logp_all = log_probs(z)
        step = logit_step(grad_z, logp_all.exp(), lr, config.pg)
        z_next = z + step
        w_next = None if w is None else w + logit_step(grad_w, probs(w), lr, config.pg)

        # 3. diagnostics
        with torch.no_grad():
            logp = logp_all.gather(-1, batch.tokens)
            ratio = torch.exp(torch.clamp(logp - batch.old_logp, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP))
            log_b = clamped_log_ratio(logp, minibatch(sampled, where.minibatch, schedule.minibatches).old_logp)
            adv = batch.advantages
            clipped = clipped_mask(ratio, adv, stats["c_low"][:, None, None], stats["c_high"][:, None, None])
            shares = entropy_shares(logp_all, batch.tokens, grad_logp, lr, config.pg) / S
            quadrant = quadrant_of(logp_all, batch.tokens, adv, ~clipped)
            quads = split_by_quadrant(quadrant.reshape(n, -1), shares.reshape(n, -1), clipped.reshape(n, -1))
            h_next = entropy(z_next).mean(-1)
            count = lambda x: torch.full((n,), float(x), dtype=dtype)
            rec = dict(
                entropy=h_next,
                expected_reward=expected_reward(z_next, task.reward_mean).mean(-1),
                entropy_change=h_next - h,
                entropy_change_first_order=shares.sum((1, 2)),
                sample_reward=batch.rewards.mean((1, 2)),
                grad_norm=grad_z.pow(2).sum((1, 2)).sqrt(),
                staleness=count(where.data_age), ratio_age=count(where.ratio_age),
                epoch=count(where.epoch), minibatch=count(where.minibatch), rollout=count(where.rollout + 1),
                ratio_std=ratio.reshape(n, -1).std(1),
                behaviour_kl=(log_b.exp() - 1 - log_b).mean((1, 2)),
                entropy_coef=beta,
                **{key: v.to(dtype) for key, v in stats.items()},
            )
            # no gradient-carrying advantage mass at all (every group all right or all wrong, or every
            # token with A != 0 clipped): ρ is undefined, recorded as NaN instead of the core's placeholder
            empty = (stats["pos_mass"] + stats["neg_mass"]) == 0
            for key in ("rho", "rho_before", "pos_neg_ratio"):
                rec[key] = torch.where(empty, torch.nan, rec[key])
            rec.update(length_balance(*loss_tokens))
            rec["best_prob"] = best_prob(z_next, task.correct).mean(-1)
            rec["best_found"] = best_found(z_next, task.correct)
            if w is not None:
                rec["continuation_entropy"] = entropy(w_next).mean(-1)
            for i, q in enumerate(QUADRANTS):
                for what in ("dH", "clip_frac", "share"):
                    rec[f"{what}_{q}"] = quads[what][:, i]
            for key, v in rec.items():
                records[key].append(v)
        coef = bonus.next_coef(coef, h)
        z, w = z_next, w_next
        if keep_logits:
            history.append(z.clone())
        if keep_cont:
            cont_history.append(w.clone())

    metrics = {key: torch.stack(v, 1).cpu().numpy() for key, v in records.items()}
    return BanditRun(config, rule_label(rule), seeds, metrics, {key: v.cpu().numpy() for key, v in initial.items()}, z,
                     torch.stack(history) if keep_logits else None,
                     torch.stack(behaviours) if keep_logits else None,
                     dict(task=task, rule_obj=rule, schedule=schedule, bonus=bonus, dual_clip=dual_clip),
                     cont_history=torch.stack(cont_history) if keep_cont else None,
                     cont_behaviour_history=torch.stack(cont_behaviours) if keep_cont else None)
