"""Small live runs behind notebooks 04-05's sliders and tables: what the warm start writes, the oldest mini-batch
of a reuse-K rollout after K real updates (:func:`stale_batch`, pushed through the clipping core at any bounds by
:func:`toy_rl.arithmetic.views.clip_view`), and a few updates under partial rollout that keep their batches
(:func:`partial_demo`, drawn by :func:`toy_rl.arithmetic.views.version_map`). The updates are the loop's own
(:func:`toy_rl.rl.loop.update`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

from ..clipping import make_rule
from ..rl.loop import RLConfig, batch_metrics, make_optimizer, update
from ..rl.sources import BatchSource
from .policy import TinyPolicy
from .run import DEFAULTS
from .tasks import get_task
from .warmstart import load_warmstart


def answers_table(model, task, problems, samples: int = 3, seed: int = 0) -> list[dict]:
    """What the model writes for each problem: its greedy answer and ``samples`` sampled ones (temperature 1),
    each with its reward, next to the supervised target."""
    from .model.evaluate import complete
    task = get_task(task)
    prompts = [p.prompt for p in problems]
    n = task.max_answer_chars + 1
    greedy = complete(model, prompts, n)
    g = torch.Generator(device=model.device).manual_seed(seed)
    sampled = [complete(model, prompts, n, temperature=1.0, generator=g) for _ in range(samples)]
    return [dict(prompt=p.prompt, target=task.supervised_target(p), greedy=greedy[i],
                 greedy_reward=task.reward(p, greedy[i]),
                 sampled=[s[i] for s in sampled], sampled_rewards=[task.reward(p, s[i]) for s in sampled])
            for i, p in enumerate(problems)]


class StoredBatch(NamedTuple):
    """One batch of sampled answers with the behaviour log-probs recorded at sampling time and the log-probs
    of the policy that trains on it now (``staleness`` updates later)."""
    logp: torch.Tensor          # (B, N) current policy
    old_logp: torch.Tensor      # (B, N) behaviour policy
    advantages: torch.Tensor    # (B,)
    mask: torch.Tensor          # (B, N)
    rewards: torch.Tensor       # (B,)
    staleness: int
    task: str


def stale_batch(task: str = "add", staleness: int = 4, seed: int = 0, warmstart=None, device="auto",
                rule: str = "symmetric", **overrides) -> StoredBatch:
    """The oldest mini-batch of a reuse-``staleness`` rollout, as the loop would see it.

    From the cached warm start, one rollout of (K+1)·P prompts is split into K+1 mini-batches
    (:class:`toy_rl.rl.sources.BatchSource`, mode "reuse"); K real updates (``rule``, the default RL
    settings of :data:`toy_rl.arithmetic.DEFAULTS` unless overridden) train on the first K; the last one is
    returned with the current policy's log-probs of its tokens, K updates after it was sampled.
    """
    t = get_task(task)
    cfg = RLConfig(**{**{k: DEFAULTS[k] for k in ("lr", "prompts", "group_size")}, **overrides,
                      "staleness": staleness, "seed": seed, "rule": rule})
    torch.manual_seed(seed)
    policy = TinyPolicy(load_warmstart(t, warmstart, device=device, progress=False))
    source = BatchSource(policy, t, cfg.prompts, cfg.group_size, t.max_answer_chars + 1, staleness, "reuse",
                         seed=seed)
    opt = make_optimizer(policy, cfg.lr)
    for version in range(staleness):
        update(policy, opt, source.next(version), make_rule(rule), cfg)
    batch = source.next(staleness)
    with torch.no_grad():
        logp, _ = policy.score(batch.input_ids, batch.attention_mask, batch.start)
    return StoredBatch(logp.cpu(), batch.old_logp, batch.advantages, batch.response_mask, batch.rewards,
                       staleness, t.name)


def partial_demo(task: str = "scratchpad", budget: int = 8, steps: int = 12, prompts: int = 8, group_size: int = 4,
                 rule: str = "bapo", seed: int = 0, warmstart=None, device="auto", **overrides) -> dict:
    """A few real updates under partial rollout, keeping every batch (so its per-token versions can be shown).

    Same pieces as :func:`toy_rl.rl.loop.train`: a :class:`~toy_rl.rl.sources.BatchSource` with a token
    budget hands out the groups that finished at each step, and one clipped update trains on them.
    Returns {"batches": [(step, Batch)], "steps": [{step, groups, staleness_mean, staleness_max,
    mixed_versions}], "budget", "task"}.
    """
    t = get_task(task)
    cfg = RLConfig(**{"lr": DEFAULTS["lr"], **overrides, "rule": rule, "partial": budget, "seed": seed,
                      "prompts": prompts, "group_size": group_size})
    torch.manual_seed(seed)
    policy = TinyPolicy(load_warmstart(t, warmstart, device=device, progress=False))
    source = BatchSource(policy, t, prompts, group_size, t.max_answer_chars + 1, budget=budget, seed=seed)
    opt = make_optimizer(policy, cfg.lr)
    batches, rows = [], []
    for step in range(steps):
        batch = source.next(step)
        row = {"step": step, "groups": 0}
        if batch is not None:
            row.update(batch_metrics(batch, step))
            update(policy, opt, batch, make_rule(rule), cfg)
            batches.append((step, batch))
        rows.append(row)
    return {"batches": batches, "steps": rows, "budget": budget, "task": t.name}


def answer_versions(batch, step: int) -> list[dict]:
    """Every answer of a batch: its text, the policy version that wrote each token, its reward, and
    each token's age (updates between writing it and training on it at ``step``)."""
    from .model.tokenizer import decode
    out = []
    answers = [(g, a) for g in batch.groups for a in g.answers]
    for (g, a), reward in zip(answers, batch.rewards.tolist()):
        out.append(dict(prompt=g.problem.prompt, text="".join(decode([tok]) or "·" for tok in a.tokens),
                        versions=list(a.version), ages=[step - v for v in a.version], reward=reward))
    return out


def last_answers(demo: dict, answers: int = 8) -> list[dict]:
    """The last ``answers`` answers trained on in a :func:`partial_demo`, oldest first, each as
    :func:`answer_versions` gives it plus the update ``step``."""
    rows = []
    for step, batch in reversed(demo["batches"]):
        for r in answer_versions(batch, step):
            rows.append({**r, "step": step})
            if len(rows) == answers:
                return rows[::-1]
    return rows[::-1]


def demo_summary(demo: dict) -> dict:
    """Steps that made an update, mean token age, largest age and share of answers mixing versions."""
    rows = [r for r in demo["steps"] if r["groups"]]
    mean = lambda k: round(float(np.mean([r[k] for r in rows])), 3) if rows else math.nan
    return dict(budget=demo["budget"], updates=len(rows), steps=len(demo["steps"]),
                staleness_mean=mean("staleness_mean"), staleness_max=max((r["staleness_max"] for r in rows),
                                                                         default=math.nan),
                mixed_versions=mean("mixed_versions"), groups_per_update=mean("groups"))
