"""Exercises of notebook 02 (the off-policy bandit): GRPO vs Dr. GRPO advantages, and the age of the data."""
from __future__ import annotations

import torch

from . import register
from .framework import Case, Exercise, Mistake, close, exact

NB = "02_off_policy_bandit"
T = lambda rows: torch.tensor(rows, dtype=torch.float64)     # noqa: E731


# ----------------------------------------------------------------------------- group advantages

def _adv_cases():
    one_right = T([[0.0, 0.0, 0.0, 1.0]])
    cases = [
        Case("one group, one right answer (GRPO)", (one_right, "grpo")),
        Case("one group, one right answer (Dr. GRPO)", (one_right, "drgrpo")),
        Case("a group where every answer is wrong (GRPO)", (T([[0.0, 0.0, 0.0, 0.0]]), "grpo"),
             note="equal rewards: std 0, nothing to learn from, so every advantage is 0 (not NaN)"),
        Case("two groups, two prompts (GRPO)", (T([[0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]]), "grpo"),
             note="each row is its own group: its own mean and std"),
        Case("graded rewards (Dr. GRPO)", (T([[0.2, 0.9, 0.5], [1.0, 0.0, 0.3]]), "drgrpo")),
        Case("graded rewards (GRPO)", (T([[0.2, 0.9, 0.5], [1.0, 0.0, 0.3]]), "grpo")),
    ]
    g = torch.Generator().manual_seed(201)
    for i in range(6):
        n, G = int(torch.randint(1, 6, (1,), generator=g)), int(torch.randint(2, 17, (1,), generator=g))
        if i % 2 == 0:
            rewards = (torch.rand(n, G, generator=g, dtype=torch.float64) < 0.3).to(torch.float64)
            rewards[0, 0] = 1.0 - rewards[0, 1]          # no all-equal first group: both kinds differ
        else:
            rewards = torch.randn(n, G, generator=g, dtype=torch.float64)
        kind = "grpo" if i % 3 != 2 else "drgrpo"
        cases.append(Case(f"random groups #{i + 1} ({n} x G = {G}, {kind})", (rewards, kind), random=True))
    return cases


def _population_std(rewards, kind="grpo"):
    c = rewards - rewards.mean(-1, keepdim=True)
    return c if kind == "drgrpo" else c / (rewards.std(-1, unbiased=False, keepdim=True) + 1e-6)


def _drgrpo_divides(rewards, kind="grpo"):
    return (rewards - rewards.mean(-1, keepdim=True)) / (rewards.std(-1, keepdim=True) + 1e-6)


def _grpo_no_std(rewards, kind="grpo"):
    return rewards - rewards.mean(-1, keepdim=True)


def _whole_batch(rewards, kind="grpo"):
    c = rewards - rewards.mean()
    return c if kind == "drgrpo" else c / (rewards.std() + 1e-6)


def _no_eps(rewards, kind="grpo"):
    c = rewards - rewards.mean(-1, keepdim=True)
    return c if kind == "drgrpo" else c / rewards.std(-1, keepdim=True)


def _not_centred(rewards, kind="grpo"):
    return rewards if kind == "drgrpo" else rewards / (rewards.std(-1, keepdim=True) + 1e-6)


# ----------------------------------------------------------------------------- the age of the data

def _age_cases():
    cases = [
        Case("on-policy, reuse", (7, 0, "reuse"), note="staleness 0: every update gets a fresh batch"),
        Case("on-policy, lag", (7, 0, "lag")),
        Case("reuse: first use of the first batch", (0, 4, "reuse"), note="a batch is fresh the first time it is used"),
        Case("reuse: fourth use of the first batch", (3, 4, "reuse")),
        Case("reuse: the second batch's first use", (5, 4, "reuse"),
             note="with staleness 4 one batch serves 5 updates (0..4); update 5 samples a new one"),
        Case("reuse: the second batch's last use", (9, 4, "reuse")),
        Case("lag: before the lag fills up", (2, 4, "lag"),
             note="the first updates use the initial policy: at update 2 it is only 2 updates old"),
        Case("lag: steady state", (10, 4, "lag"), note="lag mode samples a fresh batch every update"),
    ]
    g = torch.Generator().manual_seed(202)
    for i in range(6):
        t, k = int(torch.randint(0, 300, (1,), generator=g)), int(torch.randint(0, 9, (1,), generator=g))
        mode = ("reuse", "lag")[i % 2]
        cases.append(Case(f"random update #{i + 1}", (t, k, mode), random=True))
    return cases


def _reuse_always_stale(t, staleness, mode):
    if mode == "reuse":
        return staleness, t // (staleness + 1) + 1
    return min(t, staleness), t + 1


def _lag_always_k(t, staleness, mode):
    if mode == "reuse":
        return t % (staleness + 1), t // (staleness + 1) + 1
    return staleness, t + 1


def _batches_off_by_one(t, staleness, mode):
    if mode == "reuse":
        return t % (staleness + 1), t // (staleness + 1)
    return min(t, staleness), t


def _per_batch_is_k(t, staleness, mode):
    if mode == "reuse":
        e = max(staleness, 1)
        return t % e, t // e + 1
    return min(t, staleness), t + 1


def _lag_reuses(t, staleness, mode):
    e = staleness + 1
    if mode == "lag":
        return min(t, staleness), t // e + 1
    return t % e, t // e + 1


register(
    Exercise(
        name="group_advantages", notebook=NB,
        title="GRPO vs Dr. GRPO advantages for groups of answers (mean, unbiased std + eps, per group)",
        solution="toy_rl.solutions.nb02:group_advantages",
        cases=_adv_cases,
        nudge="per row (one prompt's group): GRPO A = (R − mean) / (std + 1e-6) with the unbiased std (divide by "
              "G − 1), Dr. GRPO A = R − mean. Use the last axis only (keepdim=True keeps the shapes aligned).",
        mistakes=(
            Mistake(_population_std, "GRPO (as TRL and verl compute it) uses the unbiased std, dividing by G − 1: "
                                     "torch's default `.std()`, numpy's `ddof=1`."),
            Mistake(_drgrpo_divides, "Dr. GRPO drops the division by the std: A = R − mean (the std up-weights "
                                     "groups that are almost all right or all wrong)."),
            Mistake(_grpo_no_std, "GRPO divides the centred rewards by the group's std (+ 1e-6); that is Dr. GRPO's answer."),
            Mistake(_whole_batch, "each row is one prompt's group: take the mean and std over the last axis only, "
                                  "not over the whole batch."),
            Mistake(_no_eps, "a group whose rewards are all equal has std 0: add eps = 1e-6 to the std, so that "
                             "its advantages are 0 instead of NaN."),
            Mistake(_not_centred, "subtract the group mean first: an advantage says better or worse than the group."),
        ),
        compare=close(rtol=1e-5, atol=1e-6),
    ),
    Exercise(
        name="data_age", notebook=NB,
        title="how stale the batch of update t is, and how many batches were sampled, in reuse and lag mode",
        solution="toy_rl.solutions.nb02:data_age",
        cases=_age_cases,
        nudge="reuse: one batch serves staleness + 1 updates, and its j-th use (j = 0, 1, ...) is j updates old. "
              "lag: a fresh batch every update, sampled by the policy of `staleness` updates ago, or the initial "
              "policy while t < staleness. Return a pair (age, batches sampled so far).",
        mistakes=(
            Mistake(_reuse_always_stale, "in reuse mode the first update on a batch is on fresh data (age 0); "
                                         "only its last use is `staleness` updates old."),
            Mistake(_lag_always_k, "in lag mode the first updates use the initial policy, which at update t is "
                                   "only t updates old: the age is min(t, staleness)."),
            Mistake(_batches_off_by_one, "count the batch that update t itself uses: after update 0, one batch has "
                                         "been sampled."),
            Mistake(_per_batch_is_k, "with staleness k one batch serves k + 1 updates (k = 0 is one update per batch)."),
            Mistake(_lag_reuses, "lag mode samples a fresh batch every update (each used once): t + 1 batches "
                                 "after update t."),
        ),
        compare=exact(),
    ),
)
