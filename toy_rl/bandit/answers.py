"""Answers of several tokens, so that long failed answers can make negative tokens dominate the loss.

Why (docs/protocol.md, section 1): group-normalised advantages sum to zero in
each group, so with a token-mean loss the positive share of the loss is, on-policy,

    ρ = pos / (pos + neg) = 1 / (1 + λ),   λ = Σ_{A<0} |A|·len / Σ_{A>0} A·len,

the wrong answers' tokens over the right answers' tokens (each weighted by |A|).
One-token answers give λ = 1 and ρ = 0.5 in every mixed group, whatever the
accuracy, and BAPO's search (target ρ0 = 0.4, §5.1) rarely has anything to do.
The paper's setting has long failed answers (8k-token traces that ramble or get
truncated, §3), i.e. λ > 1. This module gives the bandit that knob.

An answer to context s has these tokens:

    token 0      the decision a ~ π_s = softmax(z_s). It alone earns the reward r̄(a),
                 as in the one-token bandit; the exact entropy and expected reward
                 reported by the simulator are those of π_s.
    tokens 1..   the rest of the answer, drawn from a second softmax per context, the
                 continuation ψ_s = softmax(w_s): it starts equal to π_s's initial
                 logits and is trained by the same loss, but its tokens earn nothing.

Length: an answer with reward R ∈ [0, 1] has round(L·(1 + (λ − 1)·(1 − R))) tokens
(halves rounded up, at least 1), L = ``answer_len``, λ = ``length_ratio``: L when
right, round(λ·L) when wrong, in between for a partial reward (failed answers
ramble). With binary rewards, λ of every mixed group is round(λ·L)/L exactly.

Every token of answer i carries the answer's advantage A_i and its own behaviour
log-prob (recorded when it was sampled), and the loss is the token-mean over all
answer tokens (verl's and DAPO's default), so a long wrong answer weighs more.

Why a separate continuation table instead of drawing the rest from π_s itself:
a continuation token's advantage says nothing about which token it is, so on
π_s it would only add zero-mean noise (on-policy) to the decision, plus a
rule-dependent bias once clipped; the decision would learn from noise that grows
like √(answer length). With ψ_s the decision learns from its own token exactly as
in the one-token bandit, while the continuation tokens still do what long answers
do to the clipped loss: they carry advantage mass (λ), their ratios drift under
staleness like any trained token's, and they are clipped by the same bounds.

With L = 1 and λ = 1 (the defaults) there is no continuation: the batch, the loss
inputs and every number are those of the one-token bandit, bit for bit.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..advantages import group_advantages
from .policy import log_probs, sample_tokens
from .rewards import Task, draw_rewards
from .rng import ACTIONS, CONTINUATION, REWARDS, uniforms


def answer_length(reward: float, answer_len: int, length_ratio: float) -> int:
    """Tokens in an answer with reward R: round(L·(1 + (λ − 1)·(1 − R))), R clipped to [0, 1], at least 1."""
    r = min(max(float(reward), 0.0), 1.0)
    return max(1, math.floor(answer_len * (1 + (length_ratio - 1) * (1 - r)) + 0.5))


def answer_lengths(rewards: torch.Tensor, answer_len: int, length_ratio: float) -> torch.Tensor:
    """:func:`answer_length` for a tensor of rewards; int64, same shape."""
    r = rewards.to(torch.float64).clamp(0.0, 1.0)
    return torch.floor(answer_len * (1 + (length_ratio - 1) * (1 - r)) + 0.5).clamp(min=1).to(torch.int64)


class BanditBatch(NamedTuple):
    """One rollout of the bandit: G answers to each of S contexts, for every seed (rung 2's and 3's batch of
    padded token sequences is :class:`toy_rl.rl.rollout.Batch`)."""
    tokens: torch.Tensor      # (seeds, S, G) the decision tokens
    old_logp: torch.Tensor    # (seeds, S, G) their behaviour log-probs, recorded at sampling time
    rewards: torch.Tensor     # (seeds, S, G)
    advantages: torch.Tensor  # (seeds, S, G), one per answer
    cont_tokens: torch.Tensor | None = None     # (seeds, S, G, T − 1) continuation tokens (T = longest answer)
    cont_old_logp: torch.Tensor | None = None   # (seeds, S, G, T − 1) their behaviour log-probs
    lengths: torch.Tensor | None = None         # (seeds, S, G) tokens per answer (None: one token each)



Batch = BanditBatch      # its old name

def sample_batch(task: Task, behaviour_logits: torch.Tensor, seeds: list, rollout: int, group_size: int,
                 advantage: str, behaviour_cont: torch.Tensor | None = None, answer_len: int = 1,
                 length_ratio: float = 1.0) -> BanditBatch:
    """Sample G answers per context from the behaviour policy, score them, compute advantages.

    ``behaviour_logits`` (seeds, S, K) samples the decisions; ``behaviour_cont`` (same shape) the
    continuation, needed when answers can be longer than one token.
    """
    n_seeds, S, _ = behaviour_logits.shape
    dtype = behaviour_logits.dtype
    u = uniforms(seeds, ACTIONS, rollout, (S, group_size), dtype)
    tokens = sample_tokens(behaviour_logits, u)
    old_logp = log_probs(behaviour_logits).gather(-1, tokens)
    u_reward = uniforms(seeds, REWARDS, rollout, (S, group_size), dtype) if task.bernoulli else None
    rewards = draw_rewards(task, tokens, u_reward)
    advantages = group_advantages(rewards, advantage)
    longest = max(answer_len, answer_length(0.0, answer_len, length_ratio))
    if longest == 1:
        return BanditBatch(tokens, old_logp, rewards, advantages)
    if behaviour_cont is None:
        raise ValueError("answers longer than one token need the continuation logits (behaviour_cont)")
    n_cont = longest - 1
    u_cont = uniforms(seeds, CONTINUATION, rollout, (S, group_size * n_cont), dtype)
    cont = sample_tokens(behaviour_cont, u_cont)                                   # (seeds, S, G·(T − 1))
    cont_old = log_probs(behaviour_cont).gather(-1, cont)
    shape = (n_seeds, S, group_size, n_cont)
    return BanditBatch(tokens, old_logp, rewards, advantages, cont.reshape(shape), cont_old.reshape(shape),
                 answer_lengths(rewards, answer_len, length_ratio))


def answer_tokens(logp: torch.Tensor, cont_logits: torch.Tensor | None, batch: BanditBatch):
    """The batch as the clipped loss sees it: one sequence per answer, one run per seed.

    ``logp`` (seeds, S, G) are the decision tokens' log-probs under the policy being trained and
    ``cont_logits`` (seeds, S, K) its continuation logits (unused for one-token batches); gradients
    flow back to both. Returns ``(logp, old_logp, advantages, mask)``: logp/old_logp/mask
    (seeds, S·G, T) with the decision at position 0, advantages (seeds, S·G), one per answer (every
    token of the answer carries it). One-token batches give (seeds, S·G, 1) for all four, the mask all ones.
    """
    n, S, G = batch.tokens.shape
    if batch.lengths is None:
        flat = lambda t: t.reshape(n, S * G, 1)
        return flat(logp), flat(batch.old_logp), flat(batch.advantages), torch.ones_like(flat(batch.old_logp))
    n_cont = batch.cont_tokens.shape[-1]
    cont_logp = log_probs(cont_logits).gather(-1, batch.cont_tokens.reshape(n, S, G * n_cont)).reshape(n, S, G, n_cont)
    seq = lambda first, rest: torch.cat([first[..., None], rest], -1).reshape(n, S * G, n_cont + 1)
    positions = torch.arange(n_cont + 1, device=batch.tokens.device)
    mask = (positions < batch.lengths[..., None]).to(logp.dtype).reshape(n, S * G, n_cont + 1)
    return (seq(logp, cont_logp), seq(batch.old_logp, batch.cont_old_logp),
            batch.advantages.reshape(n, S * G), mask)
