"""Answers packed end to end behind their shared prompt, with no padding: the layout of rung 3's scoring.

A GRPO micro-batch holds G answers to each of a few prompts, right-padded to the longest (on
`search-hard-warm` a quarter of the answer columns are real tokens: wrong answers run to 96 tokens, right
ones stop near 20). :meth:`toy_rl.lm.policy.HFPolicy.score` runs each distinct prompt once, with a KV
cache (:mod:`toy_rl.lm.prefill`: their shared few-shot prefix once too); this module lays that prompt's answers
out after it in one row,

    [prompt (cached) | answer 1 | answer 2 | ... | padding to the longest pack]

where each answer token attends to the prompt and to its own earlier tokens only, at the position it had
in its own row (prompt length + k). The same attention, hence the same log-probs and gradients as the
padded layout up to float rounding, over real tokens only. Rung 2's packing
(:mod:`toy_rl.arithmetic.model.scoring`) keeps fixed-width slots instead: its answers are a few tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Packed:
    """One micro-batch's answers packed per distinct prompt (:func:`pack_answers`).

    ids, positions: (P, S) answer inputs and their position ids, P distinct prompts, S the longest pack.
    allowed: (P, 1, S, K + S) bool, True where a query may attend a key (the cached prompt's K, then the pack).
    take: (N,) index into ``cat([last prompt state (P), packed states (P * S)])`` of the state that predicts
    each real answer token, in the row-major order of ``answer_mask[answer_mask]``.
    """
    ids: torch.Tensor
    positions: torch.Tensor
    allowed: torch.Tensor
    take: torch.Tensor


def answer_lengths(mask: torch.Tensor, start: int) -> torch.Tensor | None:
    """Each row's number of answer tokens (columns >= start), or None when some row's answer is not one run
    of real tokens from ``start`` (then it cannot be packed)."""
    answer = mask[:, start:].bool()
    n = answer.sum(1)
    contiguous = torch.arange(answer.shape[1], device=mask.device) < n[:, None]
    return n if torch.equal(answer, contiguous) else None


def pack_answers(ids: torch.Tensor, mask: torch.Tensor, start: int, where: torch.Tensor, keys: torch.Tensor,
                 prompt_len: torch.Tensor) -> Packed | None:
    """Pack a left-padded-prompt, right-padded-answer batch ``ids``/``mask`` (B, L) by prompt.

    ``where``: each row's distinct prompt (:func:`toy_rl.arithmetic.model.gpt.distinct_rows` of the columns
    < start); ``keys`` (P, K): which of the cached prompt's K key columns are real tokens of each distinct prompt
    (:class:`toy_rl.lm.prefill.Prefilled`), ``prompt_len`` (P,) their lengths. An answer of n tokens feeds its
    first n - 1 (its last is only predicted); its first token is predicted by the prompt's last state. None when
    an answer is not contiguous (:func:`answer_lengths`).
    """
    n = answer_lengths(mask, start)
    if n is None:
        return None
    dev, P = ids.device, len(keys)
    fed = (n - 1).clamp(min=0).tolist()
    offset, used = [], [0] * P
    for b, u in enumerate(where.tolist()):          # each answer's place in its prompt's pack
        offset.append(used[u])
        used[u] += fed[b]
    S = max(max(used), 1)
    p_ids = ids.new_zeros((P, S))
    pos = torch.zeros((P, S), dtype=torch.long, device=dev)
    seg = torch.full((P, S), -1, dtype=torch.long, device=dev)     # which row's answer fills each slot
    take = []
    for b, u in enumerate(where.tolist()):
        o, m = offset[b], fed[b]
        p_ids[u, o:o + m] = ids[b, start:start + m]
        pos[u, o:o + m] = prompt_len[u] + torch.arange(m, device=dev)
        seg[u, o:o + m] = b
        if n[b] > 0:                                # token 0 from the prompt's last state, token k from k - 1
            take.append(torch.cat([torch.tensor([u], device=dev), P + u * S + o + torch.arange(m, device=dev)]))
    i = torch.arange(S, device=dev)
    own = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] >= 0) & (i[None, None, :] <= i[None, :, None])
    allowed = torch.cat([keys.bool()[:, None, :].expand(P, S, keys.shape[1]), own], dim=-1)[:, None]
    take = torch.cat(take) if take else torch.zeros(0, dtype=torch.long, device=dev)
    return Packed(p_ids, pos, allowed, take)
