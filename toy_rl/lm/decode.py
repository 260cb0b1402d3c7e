"""A lean decode loop for a Llama policy with LoRA on the CPU: what :meth:`HFPolicy.sample` runs by default.

The prompts' prefill stays on the Hugging Face forward (each distinct prompt once, their shared few-shot prefix
once: :mod:`toy_rl.lm.prefill`). Its KV cache is kept once per distinct prompt, the answers' keys and values go into
one preallocated tensor
``[layers, 2, rows, kv_heads, max_new_tokens - 1, head_dim]`` (:class:`KV`), and every later token runs through
:func:`step`, a hand-written Llama decoder step: RMSNorm, rotary, grouped-query attention, SiLU MLP. It reads the
model's own weights; LoRA is merged once per ``sample`` call (``W + scale * B @ A`` in float32, rounded once to
the compute dtype; the adapters are untouched).

What it saves per step (SmolLM2-135M, 64 rows, 1 thread; bench/README.md): the DynamicCache's ``torch.cat`` of
the whole cache, repeat_kv's copies of K and V for every query head, reading a GRPO group's shared prompt once
per answer (a prompt's answers attend to its keys in one matmul), peft's two extra matmuls per projection and
most of the per-module Python. Rows that have stopped leave the batch once an eighth of it has stopped (the last
live rows move into their places: :func:`refill`).

Same distribution as the HF path: the same formulas in the same dtypes (attention in float32, as SDPA's
math backend does for bf16), the same draw (:func:`next_token`: inverse transform sampling, one uniform per live row
in batch order), which the HF path of :class:`toy_rl.lm.policy.HFPolicy` uses too, so a seeded generator gives the same
tokens on both), the same recorded log-probs. float32 logits agree with the
HF forward to ~1e-6 (tests/test_lm_decode.py).

:func:`unsupported` says when the lean path cannot run; HFPolicy then falls back to the HF forward.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .forward import cache_layers, new_cache, unique_rows
from .logprob import row_chunks, scaled_rows
from .prefill import prefill

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ROPE_TYPES = ("default", "linear", "llama3", "yarn")      # static rotary tables (no dynamic rescaling)


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def unsupported(model) -> str | None:
    """Why the lean step cannot run ``model`` (None: it can): it needs a Llama (``model_type`` "llama", SiLU,
    no biases, a static rotary type) on the CPU (CUDA is untested), with plain LoRA (no DoRA, no LoRA bias)
    on decoder projections only."""
    base = _base(model)
    cfg = getattr(base, "config", None)
    if getattr(cfg, "model_type", None) != "llama" or not hasattr(getattr(base, "model", None), "layers"):
        return f"model_type {getattr(cfg, 'model_type', None)!r} is not 'llama'"
    if next(base.parameters()).device.type != "cpu":
        return "the model is not on the CPU (the lean step is tested on the CPU only)"
    if cfg.hidden_act != "silu" or getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "hidden_act is not silu, or the projections have biases"
    if getattr(cfg, "pretraining_tp", 1) not in (None, 1):
        return "pretraining_tp > 1"
    rope = getattr(base.model.rotary_emb, "rope_type", "default")
    if rope not in ROPE_TYPES:
        return f"rope_type {rope!r} is not one of {ROPE_TYPES}"
    for name, mod in base.named_modules():
        if not hasattr(mod, "lora_A") or not hasattr(mod, "base_layer"):
            continue
        if name.rsplit(".", 1)[-1] not in PROJECTIONS or not isinstance(mod.base_layer, torch.nn.Linear):
            return f"LoRA on {name} (the lean step merges LoRA into decoder projections only)"
        if getattr(mod, "lora_variant", None) or any(getattr(mod, "lora_bias", {}).values()):
            return f"{name} has a LoRA variant (DoRA) or a LoRA bias"
    return None


def _weight(lin, dtype) -> torch.Tensor:
    """The weight a (LoRA-wrapped) linear layer applies: base + the active adapters' deltas, summed in
    float32 and rounded once to ``dtype``."""
    if not hasattr(lin, "lora_A"):
        return lin.weight
    w = lin.base_layer.weight
    if lin.disable_adapters or lin.merged:
        return w
    deltas = [lin.get_delta_weight(a).float() for a in lin.active_adapters if a in lin.lora_A.keys()]
    if not deltas:
        return w
    return (w.float() + sum(deltas)).to(dtype)


@dataclass
class Weights:
    """Everything :func:`step` reads, LoRA merged: per layer (input norm, q|k|v, o, post norm, gate, up, down)."""
    embed: torch.Tensor
    layers: list
    norm: torch.Tensor
    head: torch.Tensor
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    dtype: torch.dtype
    rotary: torch.nn.Module

    def rope(self, length: int):
        """cos and sin of positions 0 .. length-1, (length, head_dim), as the model's rotary module makes them."""
        x = torch.empty(0, dtype=self.dtype)
        cos, sin = self.rotary(x, torch.arange(length)[None])
        return cos[0], sin[0]


@torch.no_grad()
def weights(model) -> Weights:
    """The model's weights for :func:`step`, with LoRA merged (call once per ``sample``: adapters change)."""
    base = _base(model)
    cfg, inner = base.config, base.model
    dt = inner.embed_tokens.weight.dtype
    layers = []
    for layer in inner.layers:
        a, m = layer.self_attn, layer.mlp
        qkv = torch.cat([_weight(a.q_proj, dt), _weight(a.k_proj, dt), _weight(a.v_proj, dt)])
        layers.append((layer.input_layernorm.weight, qkv, _weight(a.o_proj, dt), layer.post_attention_layernorm.weight,
                       _weight(m.gate_proj, dt), _weight(m.up_proj, dt), _weight(m.down_proj, dt)))
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return Weights(inner.embed_tokens.weight, layers, inner.norm.weight, base.get_output_embeddings().weight,
                   heads, cfg.num_key_value_heads, head_dim, inner.norm.variance_epsilon, dt, inner.rotary_emb)


def _rms(x, w, eps):
    """LlamaRMSNorm's formula, op for op (float32 inside, the input's dtype out)."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype)


class KV:
    """The decode cache, float32: the prompts' shared prefix once (``prefix``: layers, 2, kv_heads, C, head_dim;
    the first ``shared`` = C key columns of the HF prefill ``hf_cache``, the same in every prompt), the rest of each
    distinct prompt's keys and values once (``prompt``: layers, 2, prompts, kv_heads, P - C, head_dim; its padding
    as -inf in ``bias``) and each row's answer so far (``answer``: layers, 2, rows, kv_heads, room, head_dim). Batch
    row i continues prompt ``u[i]``. Every row attends to the prefix in one matmul per key/value head, and a
    prompt's rows to the rest of its keys in one matmul (``slot``: row -> slot in a (prompts x slots) grid;
    ``dense`` when every slot is filled by rows sorted by prompt, as they start)."""

    def __init__(self, hf_cache, prompt_mask, u, room: int, shared: int = 0):
        keys = torch.stack([torch.stack(kv) for kv in cache_layers(hf_cache)])
        self.shared = shared
        self.prefix = keys[:, :, 0, :, :shared].float()
        self.prompt = keys[:, :, :, :, shared:].float()
        self.bias = torch.zeros(prompt_mask[:, shared:].shape).masked_fill_(~prompt_mask[:, shared:].bool(),
                                                                           float("-inf"))
        n_layers, _, _, heads, _, dim = self.prompt.shape
        self.answer = torch.empty((n_layers, 2, len(u), heads, room, dim))
        self._layout(u)

    def _layout(self, u):
        counts = torch.bincount(u, minlength=len(self.bias))
        self.u, self.slots, n = u, int(counts.max()), len(u)
        by_prompt = torch.argsort(u, stable=True)              # a row's slot: its rank among its prompt's rows
        rank = torch.empty_like(u)
        rank[by_prompt] = torch.arange(n) - (counts.cumsum(0) - counts)[u[by_prompt]]
        self.slot = u * self.slots + rank
        self.dense = n == len(self.bias) * self.slots and bool((self.slot == torch.arange(n)).all())
        self.row_bias = self.bias[u][:, None, None, :]

    def keep(self, keep, length: int) -> None:
        """Keep only batch rows ``keep`` (in that order: row ``keep[j]`` becomes row j) and the prompts they
        continue; answers are ``length`` long. Only the rows that change place are copied."""
        moved = (keep != torch.arange(len(keep))).nonzero().squeeze(1)
        if len(moved):
            self.answer[:, :, moved, :, :length] = self.answer[:, :, keep[moved], :, :length]
        u = self.u[keep]
        used = torch.unique(u)
        if len(used) < len(self.bias):
            self.prompt, self.bias, u = self.prompt[:, :, used], self.bias[used], torch.searchsorted(used, u)
        self._layout(u)

    def attend(self, i: int, q, t: int):
        """Attention output (n, kv_heads, G, head_dim) of layer i for queries q (n, kv_heads, G, head_dim), scaled,
        over the shared prefix, the rest of each row's prompt and its answer positions 0 .. t."""
        n, K, G, D = q.shape
        U, S, P, C = len(self.bias), self.slots, self.bias.shape[1], self.shared

        def to_grid(x):        # (n, K, G, X) -> (U, K, S * G, X): a prompt's rows side by side
            if not self.dense:
                x = x.new_zeros((U * S, *x.shape[1:])).index_copy_(0, self.slot, x)
            return x.view(U, S, K, G, -1).transpose(1, 2).reshape(U, K, S * G, -1)

        def from_grid(x):      # the inverse
            x = x.view(U, K, S, G, -1).transpose(1, 2).reshape(U * S, K, G, -1)
            return x if self.dense else x[self.slot]

        def by_head(x):        # (n, K, G, X) -> (K, n * G, X): every row's queries of a key/value head together
            return x.transpose(0, 1).reshape(K, n * G, -1)

        def from_head(x):      # the inverse
            return x.view(K, n, G, -1).transpose(0, 1)
        keys, values = self.answer[i, 0, :n, :, :t + 1], self.answer[i, 1, :n, :, :t + 1]
        scores = from_grid(torch.matmul(to_grid(q), self.prompt[i, 0].transpose(-1, -2))).add_(self.row_bias)
        parts = [scores, torch.matmul(q, keys.transpose(-1, -2))]
        if C:
            parts.insert(0, from_head(torch.matmul(by_head(q), self.prefix[i, 0].transpose(-1, -2))))
        att = torch.cat(parts, -1).softmax(-1)
        out = from_grid(torch.matmul(to_grid(att[..., C:C + P]), self.prompt[i, 1])) \
            + torch.matmul(att[..., C + P:], values)
        return out + from_head(torch.matmul(by_head(att[..., :C]), self.prefix[i, 1])) if C else out


def step(w: Weights, kv: KV, tok: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, t: int) -> torch.Tensor:
    """One decoder step for the first ``n = len(tok)`` rows of ``kv``: writes their keys and values at answer
    position ``t`` and returns the next-token logits (n, vocab) in the compute dtype. cos, sin: (n, head_dim) of
    each row's position."""
    n, H, K, D = len(tok), w.heads, w.kv_heads, w.head_dim
    cos, sin, half = cos[:, None], sin[:, None], D // 2
    x = F.embedding(tok, w.embed)
    for i, (w_in, w_qkv, w_o, w_post, w_gate, w_up, w_down) in enumerate(w.layers):
        qkv = F.linear(_rms(x, w_in, w.eps), w_qkv)
        qk = qkv[:, :(H + K) * D].view(n, H + K, D)
        qk = qk * cos + torch.cat((-qk[..., half:], qk[..., :half]), dim=-1) * sin     # rotary, as HF
        kv.answer[i, 0, :n, :, t] = qk[:, H:]
        kv.answer[i, 1, :n, :, t] = qkv[:, (H + K) * D:].view(n, K, D)
        o = kv.attend(i, qk[:, :H].reshape(n, K, H // K, D).float() * (D ** -0.5), t)
        x = x + F.linear(o.reshape(n, H * D).to(x.dtype), w_o)
        h = _rms(x, w_post, w.eps)
        x = x + F.linear(F.silu(F.linear(h, w_gate)) * F.linear(h, w_up), w_down)
    return F.linear(_rms(x, w.norm, w.eps), w.head)


def refill(stopped: torch.Tensor) -> torch.Tensor:
    """The rows to keep (``stopped`` False), in the order :meth:`KV.keep` takes: the live rows among the first
    ``n`` (as many as live rows) stay where they are and the live rows after them move into the places the stopped
    ones leave, so that only those are copied (keeping the live rows in order would copy nearly all of them)."""
    live = (~stopped).nonzero().squeeze(1)
    order = torch.arange(len(live))
    order[stopped[:len(live)].nonzero().squeeze(1)] = live[live >= len(live)]
    return order


_SCRATCH: dict = {}


def _scratch(name: str, rows: int, width: int, dtype, device) -> torch.Tensor:
    """A (rows, width) buffer kept from one decoding step to the next (one per name, dtype and device; at most 24 MB
    each, :func:`toy_rl.lm.logprob.row_chunks`): a buffer allocated afresh at every step pays its page faults at every
    step (17 ms to copy 64 x 49,152 logits into a fresh one, against 2 ms into one already touched)."""
    key = (name, dtype, torch.device(device))
    buf = _SCRATCH.get(key)
    if buf is None or buf.shape[0] < rows or buf.shape[1] != width:
        buf = _SCRATCH[key] = torch.empty(rows, width, dtype=dtype, device=device)
    return buf[:rows]


def _draw_order(live: torch.Tensor, order: torch.Tensor | None) -> torch.Tensor:
    """The live rows in the order they take their uniforms: ascending ``order`` (each row's index in the batch as
    first laid out; default 0 .. B-1), so the generator moves the same way whatever order and subset of rows a
    decoder keeps."""
    live_rows = live.nonzero().squeeze(1)
    return live_rows if order is None else live_rows[torch.argsort(order[live_rows])]


def next_token(logits: torch.Tensor, temperature: float, live: torch.Tensor, generator=None,
               order: torch.Tensor | None = None):
    """One decoding step for the rows of ``logits`` (B, vocab): (token, its log-prob), both (B,). Temperature 0:
    argmax, with the temperature-1 log-prob; else a draw from softmax(logits / T) for the ``live`` rows (the others'
    token is 0 and their log-prob is not one to keep) by inverse transform sampling: one uniform U per row (drawn in
    the order of :func:`_draw_order`), and the first token whose cumulative weight exceeds U times the row's total,
    the cumulative sum in float64 so that rounding moves no token's probability by more than ~1e-16 of the total
    (as ``torch.multinomial`` draws one sample; an exponential race needs a uniform per vocabulary entry: 15 ms
    against 47 ms for 64 x 49,152 here, bench/bench_head_and_draw.py). The log-prob is
    ``z[token] - max(z) - log(sum(exp(z - max(z))))`` with the sum the draw's own. Rows go a chunk at a time
    (:func:`toy_rl.lm.logprob.row_chunks`) through buffers kept from step to step (:func:`_scratch`): a fresh float32
    and a float64 copy of 192 x 49,152 logits at every step cost more in page faults than their arithmetic. Shared
    by :func:`sample_batch` and the HF path of :class:`toy_rl.lm.policy.HFPolicy`."""
    B, V = logits.shape
    tok = torch.zeros(B, dtype=torch.long, device=logits.device)
    logp = torch.empty(B, device=logits.device)
    u = torch.zeros(B, dtype=torch.float64, device=logits.device)
    draw = temperature != 0
    if draw and live.any():
        idx = _draw_order(live, order)
        u[idx] = torch.rand(len(idx), generator=generator, dtype=torch.float64, device=logits.device)
    rows, chunks = row_chunks(B, V, itemsize=8)
    z_buf, e_buf = (_scratch(name, rows, V, torch.float32, logits.device) for name in ("z", "e"))
    cdf_buf = _scratch("cdf", rows, V, torch.float64, logits.device) if draw else None
    for c in chunks:
        n = c.stop - c.start
        z, e = scaled_rows(z_buf[:n], logits[c], temperature or 1.0), e_buf[:n]
        top, arg = z.max(-1, keepdim=True)
        torch.sub(z, top, out=e).exp_()
        if not draw:
            tok[c], total = arg.squeeze(1), e.sum(-1).double()
        else:
            total = torch.ones(n, dtype=torch.float64, device=logits.device)    # rows not drawn: token 0
            on = live[c].nonzero().squeeze(1)
            if len(on):
                cdf = cdf_buf[:len(on)]
                cdf.copy_(e if len(on) == n else e[on]).cumsum_(-1)
                pick = torch.searchsorted(cdf, u[c][on, None] * cdf[:, -1:], right=True).squeeze(1)
                tok[c.start + on], total[on] = pick.clamp_(max=V - 1), cdf[:, -1]
        logp[c] = z.gather(1, tok[c, None]).squeeze(1) - top.squeeze(1) - total.log().float()
    return tok, logp


@torch.inference_mode()
def sample_batch(policy, w: Weights, prompts, max_new_tokens: int, temperature: float, generator):
    """:meth:`HFPolicy._sample_batch` on :func:`step`: the distinct prompts go through ``policy``'s HF forward
    once (:func:`toy_rl.lm.prefill.prefill`), the answers through :func:`step`. Returns one
    ``(tokens, logps, finished)`` per prompt."""
    B, T, pad_id = len(prompts), max_new_tokens, policy.pad_id
    unique, where = unique_rows(prompts)
    cache, base = new_cache(policy.model), _base(policy.model)
    pre = prefill(policy, unique, cache, base.model, share=policy.share_prefix)
    where = torch.tensor(where)
    rows = torch.argsort(where, stable=True)              # batch row -> answer; rows sorted by prompt
    u = where[rows]
    kv = KV(cache, pre.keys, u, T - 1, pre.shared)
    del cache
    logits = base.get_output_embeddings()(pre.last)[u]
    pos = pre.lengths[u]                                  # each row's position of its first answer token
    cos_t, sin_t = w.rope(int(pos.max()) + T)
    stop = torch.tensor(policy.stop_ids)
    tokens = torch.full((B, T), pad_id, dtype=torch.long)
    logps = torch.zeros((B, T), dtype=torch.float32)
    lengths = torch.zeros(B, dtype=torch.long)
    finished = torch.zeros(B, dtype=torch.bool)
    done = torch.zeros(B, dtype=torch.bool)              # stopped rows
    for t in range(T):
        tok, logp = next_token(logits, temperature, ~done, generator, order=rows)
        live = ~done
        tok = torch.where(live, tok, pad_id)
        tokens[rows, t] = tok
        logps[rows, t] = logp
        lengths[rows] += live.long()
        done |= live & torch.isin(tok, stop)
        finished[rows] = done
        if t + 1 == T or bool(done.all()):
            break
        n_done = int(done.sum())
        if n_done and n_done >= len(rows) // 8 and T - t > 2:          # drop stopped rows from the batch
            keep = refill(done)
            kv.keep(keep, t)
            rows, done, tok, pos = rows[keep], done[keep], tok[keep], pos[keep]
        logits = step(w, kv, tok, cos_t[pos + t], sin_t[pos + t], t)
    tokens, logps, lengths, finished = tokens.tolist(), logps.tolist(), lengths.tolist(), finished.tolist()
    return [(tokens[i][:n], logps[i][:n], done) for i, (n, done) in enumerate(zip(lengths, finished))]
