"""The distinct prompts of a batch through the model once, the few-shot prefix they share once: rung 3's prefill.

A rung-3 prompt is a few worked examples and then the question (``toy_rl.lm.tasks``): on ``search-hard-warm``
115 of its 133 tokens are the same in every prompt, on ``add`` 33 of 40. :func:`prefill` runs that shared
prefix once, copies its keys and values to each prompt (a KV cache, as serving engines' prefix caching does), and
runs each prompt's own tail on top of it, right-padded, with a 4-D mask:

    [shared prefix (once) | prompt 1's tail | padding]
    [  (copied)           | prompt 2's tail          ]

Each tail token attends to the prefix and to its own earlier tokens, at the position it has in its whole prompt,
so the keys, values and states are those of a full forward over each prompt, up to float rounding. Gradients flow
back through the copies into the one prefix forward. Both the sampler (:mod:`toy_rl.lm.decode`) and the scorer
(:meth:`toy_rl.lm.policy.HFPolicy.score` with packed answers, :mod:`toy_rl.lm.packing`) start from it.

An update in micro-batches scores each one separately (rung 3's comparison: 4 micro-batches of 2 prompts);
:func:`prefix_once` makes their prefills share one forward of the prefix, and its backward.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from .forward import cache_layers, new_cache

MIN_SHARED = 8          # a shorter shared prefix is not worth a second forward: left-pad the prompts instead


@dataclass
class Prefilled:
    """What :func:`prefill` leaves beside the KV cache it filled.

    last: (P, ·) the output at each prompt's last token (hidden states with ``body``, else logits).
    keys: (P, K) bool, which of the cache's K key columns hold each prompt's tokens (the rest is padding).
    lengths: (P,) each prompt's length: the position of its first answer token.
    shared: how many of the cache's first key columns hold the shared prefix, the same keys and values for every
        prompt (copies of one forward); 0 where the prompts were not run with a shared prefix.
    """
    last: torch.Tensor
    keys: torch.Tensor
    lengths: torch.Tensor
    shared: int = 0


def shared_prefix(prompts: list[list[int]]) -> int:
    """The number of leading tokens all ``prompts`` share, at most the shortest's length - 1 (every prompt keeps a
    token of its own, whose state predicts its answer's first token)."""
    first, n = prompts[0], min(len(p) for p in prompts) - 1
    for p in prompts[1:]:
        n = next((i for i in range(n) if p[i] != first[i]), n)
    return max(n, 0)


def shared_length(prompts: list[list[int]]) -> int:
    """How many leading tokens :func:`prefill` runs once for ``prompts``: their :func:`shared_prefix` where there
    are two prompts or more and it is at least :data:`MIN_SHARED` tokens; else 0."""
    c = shared_prefix(prompts) if len(prompts) > 1 else 0
    return c if c >= MIN_SHARED else 0


def prefill(policy, prompts: list[list[int]], cache, body=None, share: bool = True) -> Prefilled:
    """Run the distinct ``prompts`` (token lists) through ``policy``'s model into ``cache``: with ``share``, their
    shared prefix once where it is at least :data:`MIN_SHARED` tokens and there are two prompts or more; else
    left-padded side by side. ``body``: the decoder under the LM head (``HFPolicy._body_and_head``), whose hidden
    states ``last`` holds then; without it, logits."""
    from ..arithmetic.model.tokenizer import left_pad
    dev, P = policy.device, len(prompts)
    lengths = torch.tensor([len(p) for p in prompts], device=dev)
    held = getattr(policy, "_held_prefix", None) if share else None
    if held is not None and all(len(p) > len(held.tokens) and p[:len(held.tokens)] == held.tokens for p in prompts):
        c = len(held.tokens)
        for i, (k, v) in enumerate(held.leaves):
            cache.update(k, v, i)
    else:
        c = shared_length(prompts) if share else 0
        if not c:
            ids, mask = left_pad(prompts, dev, policy.pad_id)
            last = policy._forward(ids, mask, cache, logits_to_keep=1, body=body)[:, -1]
            return Prefilled(last, mask.bool(), lengths)
        _run_prefix(policy, prompts[0][:c], cache, body)
    cache.batch_select_indices(torch.zeros(P, dtype=torch.long, device=dev))
    tails = lengths - c
    T = int(tails.max())
    ids = torch.tensor([p[c:] + [policy.pad_id] * (T - len(p) + c) for p in prompts], device=dev)
    i = torch.arange(T, device=dev)
    real = i[None, :] < tails[:, None]                                          # (P, T)
    own = (i[None, :, None] >= i[None, None, :]) & real[:, None, :]             # (P, T queries, T keys)
    allowed = torch.cat([own.new_ones((P, T, c)), own], dim=-1)[:, None]
    out = policy._forward(ids, allowed, cache, body=body, position_ids=(c + i).expand(P, T))
    last = out[torch.arange(P, device=dev), tails - 1]
    return Prefilled(last, torch.cat([real.new_ones((P, c)), real], dim=1), lengths, c)


def _run_prefix(policy, tokens: list[int], cache, body=None) -> None:
    dev = policy.device
    policy._forward(torch.tensor([tokens], device=dev), torch.ones((1, len(tokens)), dtype=torch.long, device=dev),
                    cache, logits_to_keep=1, body=body)


@dataclass
class HeldPrefix:
    """The prefix :func:`prefix_once` ran: its tokens, its keys and values per layer as leaves of the micro-batches'
    graphs, and the tensors of its own forward they were detached from."""
    tokens: list
    leaves: list
    roots: list


@contextmanager
def prefix_once(policy, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int):
    """Within the block, every :func:`prefill` of ``policy`` whose prompts begin with the prefix that the distinct
    prompts of this batch (``input_ids[:, :start]``, left-padded) share starts from one forward of it, run here,
    rather than its own. Its keys and values enter each micro-batch's graph as leaves, which gather the gradients
    of every backward inside the block; on leaving it, those go back through the prefix's forward in one backward
    (before the optimizer's step: :func:`toy_rl.rl.loop._accumulate`). The same gradients as a prefix per
    micro-batch, summed in another order. Nothing happens where ``policy`` has no ``share_prefix`` on, or the
    prompts share fewer than :data:`MIN_SHARED` tokens."""
    if not getattr(policy, "share_prefix", False) or getattr(policy, "_held_prefix", None) is not None:
        yield
        return
    ids, mask = input_ids[:, :start], attention_mask[:, :start]
    prompts = list({tuple(r[m.bool()].tolist()) for r, m in zip(ids, mask)})
    c = shared_prefix([list(p) for p in prompts])
    if c < MIN_SHARED:
        yield
        return
    cache, body_and_head = new_cache(policy.model), policy._body_and_head()
    _run_prefix(policy, list(prompts[0][:c]), cache, body_and_head[0] if body_and_head else None)
    roots = [t for kv in cache_layers(cache) for t in kv]
    leaves = [t.detach().requires_grad_(t.requires_grad) for t in roots]
    policy._held_prefix = HeldPrefix(list(prompts[0][:c]), list(zip(leaves[::2], leaves[1::2])), roots)
    try:
        yield
    finally:
        policy._held_prefix = None
    grads = [(r, leaf.grad) for r, leaf in zip(roots, leaves) if r.requires_grad and leaf.grad is not None]
    if grads:
        torch.autograd.backward([r for r, _ in grads], [g for _, g in grads])
