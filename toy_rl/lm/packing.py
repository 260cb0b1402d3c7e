"""Answers packed end to end behind their shared prompt, with no padding: the layout of rung 3's scoring.

A GRPO micro-batch holds G answers to each of a few prompts, right-padded to the longest (on
`search-hard-warm` a quarter of the answer columns are real tokens: wrong answers run to 96 tokens, right
ones stop near 20). :meth:`toy_rl.lm.policy.HFPolicy.score` runs each distinct prompt once, with a KV
cache (:mod:`toy_rl.lm.prefill`: their shared few-shot prefix once too); this module lays that prompt's answers
out after it, end to end, in one row or a few,

    [prompt 1 (cached) | answer 1 | answer 2 | answer 5 | padding to the widest row]
    [prompt 1 (cached) | answer 3 | answer 4 |        padding                      ]
    [prompt 2 (cached) | answer 6 | answer 7 | answer 8 | answer 9                 ]

where each answer token attends to the prompt and to its own earlier tokens only, at the position it had
in its own row (prompt length + k). :func:`layout` picks the rows' width: one row per prompt pads every row to
the prompt whose answers run longest together, so where one prompt's answers are long and another's short, rows
as wide as a few of the longest answers pad less. The same attention, hence the same log-probs and gradients as the
padded layout up to float rounding, over real tokens only. Rung 2's packing
(:mod:`toy_rl.arithmetic.model.scoring`) keeps fixed-width slots instead: its answers are a few tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Packed:
    """One micro-batch's answers packed in rows behind their distinct prompts (:func:`pack_answers`).

    ids, positions: (R, S) answer inputs and their position ids, R rows of S slots.
    allowed: (R, 1, S, K + S) bool, True where a query may attend a key (the cached prompt's K, then the row).
    take: (N,) index into ``cat([last prompt state (P), packed states (R * S)])`` of the state that predicts
    each real answer token, in the row-major order of ``answer_mask[answer_mask]``.
    rows: (R,) the distinct prompt each row continues (its cache).
    """
    ids: torch.Tensor
    positions: torch.Tensor
    allowed: torch.Tensor
    take: torch.Tensor
    rows: torch.Tensor


def answer_lengths(mask: torch.Tensor, start: int) -> torch.Tensor | None:
    """Each row's number of answer tokens (columns >= start), or None when some row's answer is not one run
    of real tokens from ``start`` (then it cannot be packed)."""
    answer = mask[:, start:].bool()
    n = answer.sum(1)
    contiguous = torch.arange(answer.shape[1], device=mask.device) < n[:, None]
    return n if torch.equal(answer, contiguous) else None


ATTENTION_WEIGHT = 1500     # one more position costs about as much as this many more attention entries (score + mix
                            # over 9 heads of 64, against the projections' 7 MFLOP per position, per layer)


def _rows(fed: list[int], where: list[int], width: int) -> tuple[list[int], list[int], list[int], int]:
    """Each answer's row and offset when each prompt's answers fill rows of ``width`` slots, longest first, each
    into the first of its prompt's rows with room (first-fit decreasing); and each row's prompt, and the widest row."""
    row, offset, prompt_of, used, rows_of = [0] * len(fed), [0] * len(fed), [], [], {}
    for b in sorted(range(len(fed)), key=lambda b: (where[b], -fed[b])):
        if fed[b] == 0:
            continue                                    # a one-token answer feeds nothing: no slot
        mine = rows_of.setdefault(where[b], [])
        r = next((r for r in mine if used[r] + fed[b] <= width), None)
        if r is None:
            r = len(used)
            mine.append(r)
            used.append(0)
            prompt_of.append(where[b])
        row[b], offset[b] = r, used[r]
        used[r] += fed[b]
    return row, offset, prompt_of, max(used, default=0)


def layout(fed: list[int], where: list[int], keys: int) -> tuple[list[int], list[int], list[int], int]:
    """:func:`_rows` at the width that costs least: one row per prompt (as wide as its answers together), or rows as
    wide as the longest answer, or twice, four times... that, each row costing its positions (``ATTENTION_WEIGHT``
    each) and its attention over ``keys`` cached keys and itself. Many answers of one prompt and few of another
    share no padding this way."""
    per_prompt = {}
    for u, f in zip(where, fed):
        per_prompt[u] = per_prompt.get(u, 0) + f
    widths, w = {max(per_prompt.values(), default=0)}, max(fed, default=0)
    while 0 < w < max(widths):
        widths.add(w)
        w *= 2
    best = None
    for width in sorted(widths):
        rows = _rows(fed, where, max(width, 1))
        S = max(rows[3], 1)
        cost = max(len(rows[2]), 1) * S * (ATTENTION_WEIGHT + keys + S)
        if best is None or cost < best[0]:
            best = cost, rows
    return best[1]


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
    row, offset, prompt_of, S = layout(fed, where.tolist(), keys.shape[1])
    if not prompt_of:                               # every answer is one token: one empty row
        prompt_of = [0]
    R, S = len(prompt_of), max(S, 1)
    p_ids = ids.new_zeros((R, S))
    pos = torch.zeros((R, S), dtype=torch.long, device=dev)
    seg = torch.full((R, S), -1, dtype=torch.long, device=dev)     # which batch row's answer fills each slot
    take = []
    for b, u in enumerate(where.tolist()):
        r, o, m = row[b], offset[b], fed[b]
        p_ids[r, o:o + m] = ids[b, start:start + m]
        pos[r, o:o + m] = prompt_len[u] + torch.arange(m, device=dev)
        seg[r, o:o + m] = b
        if n[b] > 0:                                # token 0 from the prompt's last state, token k from k - 1
            take.append(torch.cat([torch.tensor([u], device=dev), P + r * S + o + torch.arange(m, device=dev)]))
    rows = torch.tensor(prompt_of, dtype=torch.long, device=dev)
    i = torch.arange(S, device=dev)
    own = (seg[:, :, None] == seg[:, None, :]) & (seg[:, :, None] >= 0) & (i[None, None, :] <= i[None, :, None])
    allowed = torch.cat([keys.bool()[rows][:, None, :].expand(R, S, keys.shape[1]), own], dim=-1)[:, None]
    take = torch.cat(take) if take else torch.zeros(0, dtype=torch.long, device=dev)
    return Packed(p_ids, pos, allowed, take, rows)
