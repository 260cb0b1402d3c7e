"""The Hugging Face forward's plumbing that :mod:`toy_rl.lm.policy` and :mod:`toy_rl.lm.decode` share.

Across transformers versions: the names of the KV-cache and keep-last-logits arguments
(:func:`forward_kwargs`), a fresh KV cache (:func:`new_cache`) and a cache's per-layer keys and values
(:func:`cache_layers`); and the distinct prompts of a batch, which the prefill runs once each
(:func:`unique_rows`: a GRPO group repeats its prompt G times).
"""
from __future__ import annotations

import inspect


def forward_kwargs(model) -> tuple[str, str | None]:
    """Names of the KV-cache and keep-last-logits arguments: transformers 5 says ``cache`` and
    ``logits_to_keep``; 4.x says ``past_key_values`` and (4.45-4.49) ``num_logits_to_keep``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    cache = "cache" if "cache" in params else "past_key_values"
    keep = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
    return cache, keep


def new_cache(model):
    """An empty DynamicCache for ``model``."""
    from transformers import DynamicCache
    try:
        return DynamicCache(config=model.config)
    except TypeError:                               # older transformers
        return DynamicCache()


def cache_layers(cache):
    """[(keys, values)] of a transformers DynamicCache (5.x ``layers``; 4.x ``key_cache`` / ``value_cache``)."""
    if hasattr(cache, "layers"):
        return [(c.keys, c.values) for c in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache))


def unique_rows(rows):
    """(distinct rows in first-seen order, index of each row's distinct row)."""
    first = {}
    where = [first.setdefault(tuple(r), len(first)) for r in rows]
    return [list(r) for r in first], where
