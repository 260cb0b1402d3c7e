"""A small decoder-only transformer (GPT), readable in one file, after nanoGPT's model.py.

    tokens -> token embedding + learned position embedding
           -> n_layer x [LayerNorm -> causal self-attention -> +, LayerNorm -> MLP -> +]
           -> LayerNorm -> logits (output layer tied to the token embedding)

Two details matter for RL on left-padded batches:

* Position ids come from the attention mask, ``position = cumsum(mask) - 1``
  (clamped at 0), so a prompt gets the same positions whether or not it is
  padded on the left. (TRL's loss forward passes no position ids and scores
  padded rows at shifted positions: DESIGN.md, "Measured pitfalls".)
* Padding keys are masked out of attention; every query may still see itself,
  so a padding row never produces NaN (its output is ignored anyway).

The default size (4 layers, d_model 64, 4 heads, context 128) has ~211k
parameters: small enough to train from scratch on a laptop CPU in a minute
or two (d_model 128 learned the arithmetic tasks more slowly per second).

``KVCache`` keeps every layer's keys and values so that sampling runs the
prompt once ("prefill") and then one new token per step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .tokenizer import VOCAB_SIZE


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = VOCAB_SIZE
    block_size: int = 128      # longest sequence (positions 0 .. block_size - 1)
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 64
    dropout: float = 0.0       # keep 0 for RL: dropout makes log-probs noisy

    def __post_init__(self):
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_head={self.n_head}")


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, L) mask -> (B, L) positions: 0, 1, 2, ... counting real tokens only (padding gets 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class KVCache:
    """Every layer's keys and values, preallocated for ``max_len`` tokens of a batch of ``batch`` rows.

    ``length`` is how many tokens are stored; ``mask`` (B, max_len) marks which are real.
    """

    def __init__(self, config: ModelConfig, batch: int, max_len: int, device=None, dtype=torch.float32):
        head = config.d_model // config.n_head
        shape = (config.n_layer, batch, config.n_head, max_len, head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.mask = torch.zeros(batch, max_len, dtype=torch.bool, device=device)
        self.length = 0
        self.max_len = max_len


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = config.dropout

    def forward(self, x, allowed, cache: KVCache | None = None, layer: int = 0):
        B, L, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=2)
        q, k, v = (t.view(B, L, self.n_head, D // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, L, hd)
        if cache is not None:   # append this chunk's keys/values, then attend over everything stored
            start, end = cache.length, cache.length + L
            cache.k[layer, :, :, start:end] = k
            cache.v[layer, :, :, start:end] = v
            k, v = cache.k[layer, :, :, :end], cache.v[layer, :, :, :end]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(B, L, D))


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, 4 * config.d_model), nn.GELU(),
                                 nn.Linear(4 * config.d_model, config.d_model), nn.Dropout(config.dropout))

    def forward(self, x, allowed, cache=None, layer=0):
        x = x + self.attn(self.ln1(x), allowed, cache, layer)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, config: ModelConfig | None = None):
        super().__init__()
        self.config = config = config or ModelConfig()
        self.wte = nn.Embedding(config.vocab_size, config.d_model)   # token embedding
        self.wpe = nn.Embedding(config.block_size, config.d_model)   # learned position embedding
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight                         # weight tying, as in GPT-2
        self.apply(self._init_weights)
        for name, p in self.named_parameters():                       # GPT-2: scale residual projections
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @property
    def device(self) -> torch.device:
        return self.wte.weight.device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """(B, L) token ids and mask (1 = real, 0 = padding) -> (B, L, vocab_size) logits.

        Positions are computed from the mask (see the module docstring). With a
        ``cache``, ``input_ids`` continues the tokens already stored there; the
        cache's length grows by L.
        """
        B, L = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        new_mask = attention_mask.bool()
        past = 0 if cache is None else cache.length
        if cache is not None:
            if past + L > cache.max_len:
                raise ValueError(f"KV cache holds {cache.max_len} tokens; cannot add {L} to {past}")
            cache.mask[:, past:past + L] = new_mask
            key_mask = cache.mask[:, :past + L]
        else:
            key_mask = new_mask
        pos = position_ids_from_mask(key_mask)[:, past:]
        if L and int(pos.max()) >= self.config.block_size:
            raise ValueError(f"sequence too long: position {int(pos.max())} but the model's context "
                             f"is block_size={self.config.block_size} tokens")

        # allowed[b, 0, i, j]: query i (absolute index past + i) may attend key j
        q_idx = torch.arange(past, past + L, device=input_ids.device)[:, None]
        k_idx = torch.arange(past + L, device=input_ids.device)[None, :]
        allowed = ((k_idx <= q_idx) & key_mask[:, None, :]) | (k_idx == q_idx)
        allowed = allowed[:, None]                                   # broadcast over heads

        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for i, block in enumerate(self.blocks):
            x = block(x, allowed, cache, i)
        if cache is not None:
            cache.length += L
        return self.lm_head(self.ln_f(x))
