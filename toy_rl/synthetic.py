"""A synthetic stale batch: numbers shaped like one off-policy GRPO update, with no model.

Used by the clipping tour, notebook 00, the benchmark and the tests. What it
mimics (docs/protocol.md, section 4, and claim 2 in docs/paper_vs_code.md):

* groups of G answers per prompt, reward 1 with probability ``accuracy``,
  GRPO advantages (reward − group mean) / group std, one per answer;
* failed answers longer than correct ones (so negatives dominate the token count);
* behaviour log-probs with a long low-probability tail;
* the policy has moved since sampling: log r = logp − old_logp ~ N(0, drift²),
  a bit wider for low-probability tokens.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from .advantages import group_advantages


class StaleBatch(NamedTuple):
    """What :func:`stale_batch` makes: one batch of answers, flat (batch, tokens), with both policies' log-probs."""
    logp: torch.Tensor        # (batch, tokens) current policy
    old_logp: torch.Tensor    # (batch, tokens) behaviour policy
    advantages: torch.Tensor  # (batch,) one per answer
    mask: torch.Tensor        # (batch, tokens) 1 on answer tokens
    rewards: torch.Tensor     # (batch,)



Batch = StaleBatch      # its old name

def stale_batch(n_prompts: int = 16, group_size: int = 8, max_tokens: int = 64, drift: float = 0.3,
                accuracy: float = 0.3, seed: int = 0, dtype=torch.float32, device="cpu") -> StaleBatch:
    """Make one stale batch of ``n_prompts × group_size`` answers (see module docstring).

    ``drift`` is the standard deviation of the log-ratio: 0 gives an on-policy batch (r ≡ 1).
    """
    if n_prompts < 1 or group_size < 2 or max_tokens < 2:
        raise ValueError("stale_batch needs n_prompts >= 1, group_size >= 2 and max_tokens >= 2")
    if not 0 <= accuracy <= 1:
        raise ValueError(f"accuracy must lie in [0, 1]; got {accuracy}")
    if drift < 0:
        raise ValueError(f"drift must be >= 0; got {drift}")
    g = torch.Generator().manual_seed(seed)
    n = n_prompts * group_size
    rewards = (torch.rand(n, generator=g) < accuracy).to(torch.float64)
    adv = group_advantages(rewards.view(n_prompts, group_size))

    # correct answers fill 30-60% of the budget, failed ones 50-100%
    frac = torch.where(rewards > 0, 0.3 + 0.3 * torch.rand(n, generator=g), 0.5 + 0.5 * torch.rand(n, generator=g))
    lengths = (frac * max_tokens).long().clamp(min=1)
    mask = (torch.arange(max_tokens)[None, :] < lengths[:, None]).to(torch.float64)

    old_logp = -torch.empty(n, max_tokens, dtype=torch.float64).exponential_(1.0, generator=g) ** 1.5
    old_logp = old_logp.clamp(min=-15.0)
    spread = drift * (1 + 0.1 * old_logp.abs())
    logp = (old_logp + spread * torch.randn(n, max_tokens, generator=g, dtype=torch.float64)).clamp(max=0.0)
    to = dict(dtype=dtype, device=device)
    return StaleBatch(logp.to(**to), old_logp.to(**to), adv.reshape(-1).to(**to), mask.to(**to), rewards.to(**to))
