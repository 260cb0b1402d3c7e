"""Attention for a bfloat16 model on the CPU: grouped-query attention in float32, keys and values never repeated.

SmolLM2 has 9 query heads and 3 key/value heads: each key/value head serves a group of 3 query heads (grouped-query
attention). Hugging Face's SDPA path copies every key and value head 3 times (``repeat_kv``) and, on a CPU in bf16,
runs SDPA's math backend, which casts the copies to float32 and multiplies each query head on its own; the backward
sums the copies' gradients back. :func:`grouped_attention` computes the same attention, in float32 too, with a
group's query heads stacked as rows of one matrix product against their shared keys::

    q: (B, H, L, D) -> (B, K, G * L, D)        H = K * G query heads; head h reads key/value head h // G
    scores = q @ k^T * D^-0.5 + mask            (B, K, G * L, S): one product per key/value head
    out = softmax(scores) @ v                   (B, K, G * L, D) -> (B, H, L, D)

Same formula, same float32 arithmetic, rounded differently (a bf16 output differs from SDPA's by a bf16 step at
most); a third of the products' calls and no copies: less time for a rung-3 update's attention, forward and backward
(``bench/bench_attention.py`` prints the ratio). A query that may attend no key (padding) gets the mean of the values
(SDPA's math backend returns 0 there): such a position is never read by a real one.

:class:`toy_rl.lm.policy.HFPolicy` installs it (:func:`use_grouped`) where its base model computes in a 16-bit
dtype on the CPU; float32 keeps SDPA.
"""
from __future__ import annotations

import torch

NAME = "toy_rl_grouped"          # the name it is registered under with transformers' attention interface


def grouped_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                      is_causal: bool | None = None, **kwargs):
    """Transformers' attention-function signature: query (B, H, L, D), key and value (B, K, S, D), a boolean mask
    (B or 1, 1, L, S; True: may attend) or None (causal, as SDPA's ``is_causal``). Returns (output (B, L, H, D) in the
    query's dtype, None). Dropout, soft-capping and position biases go to transformers' SDPA function."""
    if dropout or kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None \
            or (attention_mask is not None and (attention_mask.dtype != torch.bool or attention_mask.shape[1] != 1)):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    B, H, L, D = query.shape
    K = key.shape[1]
    if H % K:
        raise ValueError(f"{H} query heads cannot share {K} key/value heads evenly")
    G = H // K
    if attention_mask is None and L > 1 and (is_causal if is_causal is not None else getattr(module, "is_causal", True)):
        key, value = key[:, :, :L], value[:, :, :L]            # as transformers' SDPA path: causal from the top left
        attention_mask = torch.ones(L, L, dtype=torch.bool, device=query.device).tril()[None, None]
    S = key.shape[2]
    q = (query.float() * (D ** -0.5 if scaling is None else scaling)).reshape(B, K, G * L, D)
    scores = torch.matmul(q, key.float().transpose(-1, -2)).view(B, K, G, L, S)
    if attention_mask is not None:
        bias = torch.zeros(attention_mask.shape, device=query.device).masked_fill_(
            ~attention_mask, torch.finfo(torch.float32).min)
        scores = scores + bias[:, :, None]
    out = torch.matmul(scores.softmax(-1).view(B, K, G * L, S), value.float())
    return out.view(B, H, L, D).transpose(1, 2).to(query.dtype), None


def register() -> str:
    """Register :func:`grouped_attention` (and SDPA's mask format for it) with transformers; returns its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
    AttentionInterface.register(NAME, grouped_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    return NAME


def use_grouped(model, on: bool = True) -> None:
    """Make ``model`` (a transformers model, or a peft model around one) attend with :func:`grouped_attention`
    (``on``) or with SDPA again (off). A model whose attention is neither is left alone."""
    config = getattr(model, "config", None)
    if on and getattr(config, "_attn_implementation", None) == "sdpa":
        config._attn_implementation = register()
    elif not on and uses_grouped(model):
        config._attn_implementation = "sdpa"


def uses_grouped(model) -> bool:
    """Whether ``model`` attends with :func:`grouped_attention` (a run records it: it rounds apart from SDPA)."""
    return getattr(getattr(model, "config", None), "_attn_implementation", None) == NAME
