"""Score given tokens under the model: the log-probs the RL loss needs, in one forward pass.

A GRPO batch asks each prompt G times. By default each distinct prompt is computed
once: it is packed into one row with the answers that share it,

    [prompt | answer 1 | answer 2 | ... ]     (at most ``row_tokens`` tokens a row)

and each answer attends to the prompt and to its own earlier tokens only, at the
positions it has alone. One forward; the same log-probs and gradients as scoring
every row on its own, up to float rounding.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .gpt import distinct_rows, position_ids_from_mask


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int,
                   temperature: float = 1.0, with_entropy: bool = False, share_prompts: bool = True):
    """Log-probs of ``input_ids[:, start:]``, each given every token before it: shape (B, L - start).

    One forward over the batch, positions from ``attention_mask`` (so left-padded
    rows are scored at the same positions they were sampled at), then the logits
    at index t - 1 are gathered at token t. Entries whose token is padding are
    still computed; multiply by the mask before using them. ``share_prompts``:
    rows whose first ``start`` columns are equal run that prompt once (see the
    module docstring).

    ``temperature`` divides the logits first (use the sampling temperature to
    get the probabilities the sampler used). With ``with_entropy=True`` also
    returns the exact entropy (nats) of each of those next-token distributions,
    shape (B, L - start), without autograd (it is only logged).
    """
    if not 1 <= start < input_ids.shape[1]:
        raise ValueError(f"start must be in 1 .. {input_ids.shape[1] - 1} (the first scored token needs "
                         f"a token before it); got {start}")
    logits = next_token_logits(model, input_ids, attention_mask, start, share_prompts).float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, input_ids[:, start:, None]).squeeze(-1)
    if not with_entropy:
        return logp
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def next_token_logits(model, input_ids, attention_mask, start: int, share_prompts: bool = True,
                      row_tokens: int = 64):
    """The logits at columns start - 1 .. L - 2 (those predicting ``input_ids[:, start:]``): (B, L - start, V).

    With ``share_prompts`` and at least two rows with the same prompt (columns < start,
    tokens and mask), the rows are packed (module docstring); else one plain forward.
    ``row_tokens`` caps a packed row: a group whose answers do not fit in one takes
    several rows, each with the prompt (attention cost grows with the square of a row).
    """
    B = input_ids.shape[0]
    if share_prompts and B > 1:
        first, where = distinct_rows(input_ids[:, :start], attention_mask[:, :start])
        if len(first) < B:
            return _packed_logits(model, input_ids, attention_mask, start, first, where, row_tokens)
    return model(input_ids, attention_mask)[:, start - 1:-1]


def _packed_logits(model, ids, mask, start, first, where, row_tokens):
    """``next_token_logits`` with each prompt followed by its answers in one row (``distinct_rows`` gives
    ``first`` and ``where``). Answer inputs are columns start .. L-2 (the last token is only predicted)."""
    B, L = ids.shape
    A = L - 1 - start
    per_row = max(1, (row_tokens - start) // max(A, 1))       # answers per packed row
    row_of, used, packed_row, slot, prompt_of = {}, {}, [], [], []
    for u in where.tolist():                                   # a group's answers fill rows of per_row
        n = used[u] = used.get(u, -1) + 1
        key = (u, n // per_row)
        if key not in row_of:
            row_of[key] = len(prompt_of)
            prompt_of.append(u)
        packed_row.append(row_of[key])
        slot.append(n % per_row)
    dev = ids.device
    R, T = len(prompt_of), start + min(max(used.values()) + 1, per_row) * A
    r = torch.tensor(packed_row, device=dev)[:, None]
    slot = torch.tensor(slot, device=dev)[:, None]
    cols = start + slot * A + torch.arange(A, device=dev)      # (B, A): where each answer input goes
    src = first[torch.tensor(prompt_of, device=dev)]           # a row holding each packed row's prompt

    p_ids, p_mask = ids.new_zeros((R, T)), mask.new_zeros((R, T))
    pos = torch.zeros((R, T), dtype=torch.long, device=dev)
    seg = torch.full((R, T), -1, dtype=torch.long, device=dev)   # 0: the prompt, 1 + slot: an answer
    p_ids[:, :start], p_mask[:, :start] = ids[src, :start], mask[src, :start]
    pos[:, :start], seg[:, :start] = position_ids_from_mask(p_mask[:, :start]), 0
    p_ids[r, cols], p_mask[r, cols] = ids[:, start:-1], mask[:, start:-1]
    pos[r, cols] = position_ids_from_mask(mask[:, :-1])[:, start:]
    seg[r, cols] = 1 + slot

    i = torch.arange(T, device=dev)
    own_or_prompt = (seg[:, :, None] == seg[:, None, :]) | (seg[:, None, :] == 0)
    allowed = ((i[:, None] >= i) & p_mask.bool()[:, None, :] & own_or_prompt) | (i[:, None] == i)
    logits = model(p_ids, p_mask, positions=pos, allowed=allowed)
    take = torch.cat([cols.new_full((B, 1), start - 1), cols], 1)   # the prompt's last column, then the answer's
    return logits[r, take]
