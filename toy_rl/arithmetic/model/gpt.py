"""A small decoder-only transformer (GPT), readable in one file, after nanoGPT's model.py.

    tokens -> token embedding + learned position embedding
           -> n_layer x [LayerNorm -> causal self-attention -> +, LayerNorm -> MLP -> +]
           -> LayerNorm -> logits (output layer tied to the token embedding)

Two details matter for RL on left-padded batches:

* Position ids come from the attention mask, ``position = cumsum(mask) - 1``
  (clamped at 0), so a prompt gets the same positions whether or not it is
  padded on the left. (TRL's loss forward passes no position ids and scores
  padded rows at shifted positions: docs/protocol.md, "Pitfalls measured in peer tools".)
* Padding keys are masked out of attention; every query may still see itself,
  so a padding row never produces NaN (its output is ignored anyway).

The default size (4 layers, d_model 64, 4 heads, context 128) has 211,520
parameters: small enough to train from scratch on a laptop CPU in a minute
or two (d_model 128 learned the arithmetic tasks more slowly per second).

``KVCache`` keeps every layer's keys and values so that sampling runs the
prompt once ("prefill") and then one new token per step; a prompt shared by
G answers runs once and its cache is copied to the G rows (``KVCache.select``).
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
    """Every layer's keys and values so far, (B, n_head, T, head) each, and ``mask`` (B, T): which are real.

    Starts empty; each forward with the cache appends its L tokens. ``select(index, room)``
    keeps rows ``index`` (with repeats: a prompt's cache copied to every answer that shares
    it) in buffers with ``room`` free token slots, which later appends fill in place instead
    of copying the whole cache every decoding step (for sampling: no autograd through that).
    """

    def __init__(self, n_layer: int):
        self.k, self.v = [None] * n_layer, [None] * n_layer
        self.mask = None

    @property
    def length(self) -> int:
        return 0 if self.mask is None else self.mask.shape[1]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Store this chunk's keys/values for ``layer``; returns all stored so far."""
        K, V = self.k[layer], self.v[layer]
        end = self.length                                  # GPT.forward has already added this chunk's mask
        start = end - k.shape[2]
        if K is not None and K.shape[2] >= end:            # free slots: write in place
            K[:, :, start:end], V[:, :, start:end] = k, v
            return K[:, :, :end], V[:, :, :end]
        if K is not None:
            k, v = torch.cat([K[:, :, :start], k], 2), torch.cat([V[:, :, :start], v], 2)
        self.k[layer], self.v[layer] = k, v
        return k, v

    def select(self, index: torch.Tensor, room: int = 0) -> "KVCache":
        """Keep rows ``index`` (B,), in new buffers with ``room`` free token slots each."""
        n, B, T = self.mask.shape[0], index.shape[0], self.length
        grouped = B % n == 0 and torch.equal(index.cpu(), torch.arange(n).repeat_interleave(B // n))

        def rows(t):
            out = t.new_empty(B, t.shape[1], T + room, t.shape[3])
            if grouped:         # each row G times in a row (a GRPO batch): one broadcast copy
                out.view(n, B // n, *out.shape[1:])[:, :, :, :T] = t[:, None, :, :T]
            else:
                out[:, :, :T] = t[index, :, :T]
            return out
        self.k, self.v = [rows(t) for t in self.k], [rows(t) for t in self.v]
        self.mask = self.mask[index]
        return self


def distinct_rows(*columns: torch.Tensor):
    """Rows of (B, ·) tensors (compared side by side) that repeat: ``(first, where)``, two (·,) long tensors.

    ``first`` indexes each distinct row once (first-seen order); ``where[b]`` is the position in
    ``first`` of row b's copy, so ``x[first][where]`` equals ``x``. A dict on the host: for a
    few hundred short rows much cheaper than ``torch.unique(dim=0)``.
    """
    seen, first, where = {}, [], []
    for b, row in enumerate(torch.cat([c.long() for c in columns], 1).tolist()):
        i = seen.setdefault(tuple(row), len(first))
        if i == len(first):
            first.append(b)
        where.append(i)
    dev = columns[0].device
    return torch.tensor(first, device=dev), torch.tensor(where, device=dev)


def attention(q, k, v, bias):
    """softmax(q kᵀ / √head + bias) v for (B, H, ·, head) tensors, with ``bias`` (B, H, L, T) 0 where a
    query may see a key and -inf elsewhere: (B, H, L, head).

    The same function as ``F.scaled_dot_product_attention``, written out: on a CPU, at
    these sizes, up to 2x faster forward and backward (measured). Torch's CPU softmax is
    ~15x slower when there are fewer keys than floats in one SIMD vector (16 with AVX-512),
    as when decoding a short answer; then the softmax is written out too.
    """
    B, H, L, hd = q.shape
    q, k, v = (t.reshape(B * H, -1, hd) for t in (q, k, v))
    att = torch.baddbmm(bias.view(B * H, L, -1), q, k.transpose(1, 2), alpha=hd ** -0.5)
    if att.shape[-1] >= 16:
        return torch.bmm(F.softmax(att, dim=-1), v).view(B, H, L, hd)
    # the max is only a shift (softmax ignores it: no gradient); clamp: exp(-inf) is slow here,
    # and e^-80 vanishes next to the largest weight, e^0 = 1
    att = (att - att.detach().amax(-1, keepdim=True)).clamp(min=-80.0).exp()
    if L == 1:          # one query (decoding): a broadcast product, ~2x faster than a one-row bmm here
        return ((att.transpose(1, 2) * v).sum(1, keepdim=True) / att.sum(-1, keepdim=True)).view(B, H, L, hd)
    return (torch.bmm(att, v) / att.sum(-1, keepdim=True)).view(B, H, L, hd)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = config.dropout

    def forward(self, x, bias, cache: KVCache | None = None, layer: int = 0):
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.n_head, D // self.n_head).permute(2, 0, 3, 1, 4)  # (B, H, L, hd)
        if cache is not None:   # append this chunk's keys/values, then attend over everything stored
            k, v = cache.append(layer, k, v)
        if q.device.type == "cpu" and not (self.training and self.dropout):
            y = attention(q, k, v, bias)
        else:                   # fused kernels on GPUs; attention dropout
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias,
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

    def forward(self, x, bias, cache=None, layer=0):
        x = x + self.attn(self.ln1(x), bias, cache, layer)
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
                cache: KVCache | None = None, positions: torch.Tensor | None = None,
                allowed: torch.Tensor | None = None) -> torch.Tensor:
        """(B, L) token ids and mask (1 = real, 0 = padding) -> (B, L, vocab_size) logits.

        Positions are computed from the mask (see the module docstring). With a
        ``cache``, ``input_ids`` continues the tokens already stored there; the
        cache's length grows by L. For packed rows (several sequences in one row,
        see :mod:`toy_rl.arithmetic.model.scoring`), pass ``positions`` (B, L) and ``allowed``
        (B, L, L): which key each query may attend (every query must see itself).
        """
        B, L = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        key_mask = attention_mask.bool()
        past = 0 if cache is None else cache.length
        if past:
            key_mask = torch.cat([cache.mask, key_mask], 1)
        if cache is not None:
            cache.mask = key_mask
        pos = position_ids_from_mask(key_mask)[:, past:] if positions is None else positions
        if (positions is not None or past + L > self.config.block_size) and int(pos.max()) >= self.config.block_size:
            raise ValueError(f"sequence too long: position {int(pos.max())} but the model's context "
                             f"is block_size={self.config.block_size} tokens")          # (else pos <= index)

        if allowed is None:     # allowed[b, i, j]: query i (absolute index past + i) may attend key j
            q_idx = torch.arange(past, past + L, device=input_ids.device)[:, None]
            k_idx = torch.arange(past + L, device=input_ids.device)[None, :]
            allowed = ((k_idx <= q_idx) & key_mask[:, None, :]) | (k_idx == q_idx)
        bias = torch.zeros((B, self.config.n_head, *allowed.shape[1:]), dtype=self.wte.weight.dtype,
                           device=input_ids.device).masked_fill_(~allowed[:, None], float("-inf"))  # (B, H, L, T)

        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for i, block in enumerate(self.blocks):
            x = block(x, bias, cache, i)
        return self.lm_head(self.ln_f(x))
