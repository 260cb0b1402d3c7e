"""Reward presets: what each token earns and where the policy starts.

A task is a table over S contexts × K tokens: the initial logits and the mean
reward r̄(a) of every token. Rewards are either exactly r̄(a) (deterministic,
like a math verifier) or drawn Bernoulli(r̄(a)) (a noisy judge).

Presets (the task is fixed by ``task_seed``; the run seeds only change sampling):

    "rare-correct"  the case the paper's argument is about: a few correct tokens
                    (reward 1) that start with low probability (2% each), the rest
                    wrong (reward 0) with random logits ~ N(0, 1). Early on most
                    groups are all wrong, negatives dominate the batch, and the
                    correct tokens' ratio grows fastest under reuse.
    "bernoulli"     the same start, noisy rewards: the rare good tokens succeed with
                    probability 0.8, the others with a probability drawn from U(0, 0.3).
    "one-correct"   uniform start, one correct token (probability 1/K): the textbook bandit.
    "graded"        uniform start, deterministic rewards 0, 1/(K−1), ..., 1 in a random order.
    "trap"          exploration matters: one "trap" token worth 0.5 that starts likely (probability
                    TRAP_PROB), the rare correct tokens of "rare-correct" (reward 1, 2% each), the rest
                    worth 0 with random logits. Reinforcing the trap is the easy gradient; a run that
                    collapses onto it before it has sampled a reward-1 token enough stays at 0.5 for good
                    (all-trap groups carry no gradient). Scored by the final reward and by the share of
                    contexts whose best tokens end with most of the probability (policy.best_found).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

PRESETS = ("rare-correct", "bernoulli", "one-correct", "graded", "trap")
RARE_PROB = 0.02        # initial probability of each rare correct token
TRAP_PROB = 0.5         # initial probability of the trap token ("trap" preset)
TRAP_REWARD = 0.5       # its reward


class Task(NamedTuple):
    name: str
    init_logits: torch.Tensor    # (S, K) where every seed starts
    reward_mean: torch.Tensor    # (S, K) r̄(a): the reward, or its success probability if bernoulli
    bernoulli: bool              # True: R ~ Bernoulli(r̄(a)); False: R = r̄(a)
    correct: torch.Tensor        # (S, K) bool, the tokens the preset calls correct (best r̄)


def n_rare_correct(n_tokens: int) -> int:
    """How many rare correct tokens a context gets: 1 for K < 8, else 2."""
    return 1 if n_tokens < 8 else 2


def make_task(preset: str = "rare-correct", n_tokens: int = 32, n_contexts: int = 4,
              task_seed: int = 0, dtype=torch.float64) -> Task:
    """Build a preset's task (see module docstring); the same (preset, K, S, task_seed) gives the same task."""
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}; got {preset!r}")
    if not (isinstance(n_tokens, int) and n_tokens >= 2):
        raise ValueError(f"n_tokens (K) must be an integer >= 2; got {n_tokens!r}")
    if not (isinstance(n_contexts, int) and n_contexts >= 1):
        raise ValueError(f"n_contexts (S) must be an integer >= 1; got {n_contexts!r}")
    g = torch.Generator().manual_seed(task_seed)
    S, K = n_contexts, n_tokens
    order = torch.stack([torch.randperm(K, generator=g) for _ in range(S)])   # token roles per context

    if preset in ("rare-correct", "bernoulli"):
        n_good = n_rare_correct(K)
        good = torch.zeros(S, K, dtype=torch.bool).scatter_(1, order[:, :n_good], True)
        logits = torch.randn(S, K, generator=g, dtype=torch.float64)
        # set the good tokens' logits so each has probability RARE_PROB exactly
        wrong_lse = torch.logsumexp(logits.masked_fill(good, -math.inf), dim=1, keepdim=True)
        good_logit = wrong_lse + math.log(RARE_PROB / (1 - n_good * RARE_PROB))
        logits = torch.where(good, good_logit, logits)
        if preset == "rare-correct":
            mean = good.to(torch.float64)
        else:
            mean = torch.where(good, 0.8, 0.3 * torch.rand(S, K, generator=g, dtype=torch.float64))
        return Task(preset, logits.to(dtype), mean.to(dtype), preset == "bernoulli", good)

    if preset == "trap":
        if K < 3:
            raise ValueError(f"n_tokens (K) must be >= 3 for the trap preset (trap, correct, wrong); got {K}")
        n_good = n_rare_correct(K)
        good = torch.zeros(S, K, dtype=torch.bool).scatter_(1, order[:, :n_good], True)
        trap = torch.zeros(S, K, dtype=torch.bool).scatter_(1, order[:, n_good:n_good + 1], True)
        logits = torch.randn(S, K, generator=g, dtype=torch.float64)
        # the good tokens get RARE_PROB each and the trap TRAP_PROB exactly; the wrong ones share the rest
        wrong_lse = torch.logsumexp(logits.masked_fill(good | trap, -math.inf), dim=1, keepdim=True)
        rest = math.log(1 - n_good * RARE_PROB - TRAP_PROB)
        logits = torch.where(good, wrong_lse + math.log(RARE_PROB) - rest, logits)
        logits = torch.where(trap, wrong_lse + math.log(TRAP_PROB) - rest, logits)
        mean = good.to(torch.float64) + TRAP_REWARD * trap.to(torch.float64)
        return Task(preset, logits.to(dtype), mean.to(dtype), False, good)

    logits = torch.zeros(S, K, dtype=torch.float64)
    if preset == "one-correct":
        good = torch.zeros(S, K, dtype=torch.bool).scatter_(1, order[:, :1], True)
        mean = good.to(torch.float64)
    else:                                                                   # graded
        mean = order.to(torch.float64) / (K - 1)
        good = order == K - 1
    return Task(preset, logits.to(dtype), mean.to(dtype), False, good)


def draw_rewards(task: Task, tokens: torch.Tensor, u: torch.Tensor | None = None) -> torch.Tensor:
    """Rewards of sampled tokens (seeds, S, G): r̄(a), or Bernoulli(r̄(a)) from uniforms ``u`` (same shape)."""
    mean = task.reward_mean.expand(tokens.shape[:-1] + task.reward_mean.shape[-1:]).gather(-1, tokens)
    if not task.bernoulli:
        return mean
    if u is None:
        raise ValueError("a Bernoulli task needs uniforms u to draw rewards")
    return (u < mean).to(mean.dtype)
