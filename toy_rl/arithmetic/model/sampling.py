"""Batched sampling with a KV cache: prefill the prompts once, then one token per step for all rows.

Rows with the same prompt (a GRPO group asks one prompt G times) share its
prefill: each distinct prompt runs once and its KV cache is copied to its rows.
A caller that knows the groups can pass each prompt once and ``rows``.

``sample`` records, for each sampled token, its log-prob under the distribution
it was drawn from: softmax(logits / temperature). At temperature 1 that is
the policy itself, exactly what ``token_logprobs`` gives for the same tokens
(the behaviour log-probs of the RL ratio). At temperature T != 1 it is the
tempered distribution (``token_logprobs(..., temperature=T)`` matches it).
``temperature=0`` means greedy (argmax); the recorded log-prob is then the
temperature-1 log-prob of the chosen token.

Partial rollout: to resume unfinished answers, call ``sample`` again with
prompt + partial answer as the prompt, left-padded again with
``repad_left(cat([prompt_ids, s.tokens], 1), cat([prompt_mask, s.mask], 1))``.
The context check counts the whole new prompt.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .gpt import KVCache, distinct_rows
from .tokenizer import EOS_ID, PAD_ID


@dataclass
class Samples:
    tokens: torch.Tensor     # (B, N) sampled ids; PAD after a row's EOS
    logp: torch.Tensor       # (B, N) log-prob of each sampled token (see module docstring); 0 where mask is 0
    mask: torch.Tensor       # (B, N) 1 for generated tokens up to and including EOS, else 0
    finished: torch.Tensor   # (B,) True where the row produced EOS

    @property
    def lengths(self) -> torch.Tensor:
        return self.mask.sum(1)


def next_token(logits: torch.Tensor, temperature: float, generator=None):
    """One decoding step for every row: (token, log-softmax it was drawn from).

    temperature 0: argmax, with the temperature-1 log-probs; else a draw from softmax(logits / T).
    Shared by this sampler and rung 3's :class:`toy_rl.lm.policy.HFPolicy`.
    """
    logits = logits.float()
    if temperature == 0:
        return logits.argmax(-1), F.log_softmax(logits, dim=-1)
    logp_all = F.log_softmax(logits / temperature if temperature != 1 else logits, dim=-1)
    return torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(1), logp_all


def check_prompts(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, max_new_tokens: int) -> None:
    """Clear errors for the usual mistakes: right padding, empty rows, prompt + answer over the context."""
    if prompt_ids.dim() != 2 or prompt_ids.shape != prompt_mask.shape:
        raise ValueError(f"prompt_ids and prompt_mask must both be (B, P); got {tuple(prompt_ids.shape)} "
                         f"and {tuple(prompt_mask.shape)}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
    if not bool(prompt_mask[:, -1].bool().all()):
        raise ValueError("prompts must be left-padded (every row's last token real) and non-empty")
    longest = int(prompt_mask.sum(1).max())
    block = model.config.block_size
    if longest + max_new_tokens > block:
        raise ValueError(f"prompt of {longest} tokens + max_new_tokens={max_new_tokens} exceeds the model's "
                         f"context of block_size={block} tokens")


def sample(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, max_new_tokens: int,
           temperature: float = 1.0, eos_id: int = EOS_ID, generator: torch.Generator | None = None,
           pad_id: int = PAD_ID, rows: torch.Tensor | None = None) -> Samples:
    """Sample up to ``max_new_tokens`` tokens after each left-padded prompt; stop once every row has EOS.

    Returns ``Samples`` with N <= max_new_tokens columns (N is the step at
    which the last row finished). ``generator`` (a torch.Generator on the
    model's device) makes the draw repeatable. ``rows`` (optional, (B,) long):
    answer b continues prompt ``rows[b]``, for prompts given once each; without
    it there is one answer per prompt (repeated prompts still share their prefill).
    """
    check_prompts(model, prompt_ids, prompt_mask, max_new_tokens)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy); got {temperature}")
    if rows is None:
        first, rows = distinct_rows(prompt_ids, prompt_mask)
        if len(first) < len(rows):
            prompt_ids, prompt_mask = prompt_ids[first], prompt_mask[first]
        else:
            rows = None
    was_training = model.training
    if was_training:
        model.eval()                               # no dropout while sampling; restored below
    try:
        with torch.inference_mode():               # no autograd bookkeeping at all (~7% faster than no_grad)
            s = _sample(model, prompt_ids, prompt_mask, max_new_tokens, temperature, eos_id, generator, pad_id, rows)
    finally:
        if was_training:
            model.train()
    return Samples(*(t.clone() for t in (s.tokens, s.logp, s.mask, s.finished)))   # ordinary tensors again


def _sample(model, prompt_ids, prompt_mask, max_new_tokens, temperature, eos_id, generator, pad_id, rows) -> Samples:
    """The loop: run each prompt once (prefill), copy its cache to its rows, then one token per step for all rows."""
    B = prompt_ids.shape[0] if rows is None else rows.shape[0]
    dev = prompt_ids.device
    tokens = torch.full((B, max_new_tokens), pad_id, dtype=torch.long, device=dev)
    logp = torch.zeros((B, max_new_tokens), dtype=torch.float32, device=dev)
    mask = torch.zeros((B, max_new_tokens), dtype=torch.long, device=dev)
    finished = torch.zeros(B, dtype=torch.bool, device=dev)

    cache = KVCache(model.config.n_layer)
    logits = model(prompt_ids, prompt_mask, cache=cache)[:, -1]          # prefill: next-token logits
    if rows is not None:
        logits = logits[rows]
    cache.select(torch.arange(B, device=dev) if rows is None else rows, room=max_new_tokens - 1)
    n = 0
    for t in range(max_new_tokens):
        tok, logp_all = next_token(logits, temperature, generator)
        alive = ~finished
        tok = torch.where(alive, tok, pad_id)
        tokens[:, t] = tok
        logp[:, t] = torch.where(alive, logp_all.gather(1, tok[:, None]).squeeze(1), 0.0)
        mask[:, t] = alive.long()
        finished |= alive & (tok == eos_id)
        n = t + 1
        if n == max_new_tokens or bool(finished.all()):
            break
        logits = model(tok[:, None], alive[:, None].long(), cache=cache)[:, -1]

    return Samples(tokens[:, :n], logp[:, :n], mask[:, :n], finished)
