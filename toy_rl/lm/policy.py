"""A Hugging Face causal LM (with LoRA) behind the policy interface of :mod:`toy_rl.rl.policy`.

Rungs 3 and 4 use this class; rung 2's ``TinyPolicy`` is the same interface over
the from-scratch model, so the RL loop (:mod:`toy_rl.rl.loop`) runs unchanged.

Two things the loss depends on, and how they are kept right here:

* **Positions from the attention mask.** Prompts are left-padded, so a row's
  first real token is not at index 0. Both ``sample`` and ``score`` give the model
  ``position_ids = cumsum(mask) - 1`` (clamped at 0): every token sits at the same
  position when it is sampled and when it is scored (TRL 1.16 forgets this in its
  loss forward: padded rows come out 4-6 nats off; docs/protocol.md, "Pitfalls measured in peer tools").
* **Behaviour log-probs = score log-probs.** ``sample`` records each token's
  log-prob under softmax(logits / temperature), the distribution it was drawn from,
  and ``score(..., temperature)`` divides by the same temperature. Sampling runs
  in eval mode; keep LoRA dropout at 0 (see :func:`toy_rl.lm.lora.add_lora`) so the
  training forward is the same function. In float32 the two agree to ~1e-5.
* **bfloat16: the scorer's log-probs are the behaviour log-probs.** In bf16 the sampler's
  one-token-at-a-time forward and the training forward round differently (SmolLM2: about
  0.02 nats per token), so with ``rescore`` on (the default when the base weights are not
  float32) ``sample`` scores its answers again exactly as the update will (the batch laid out
  as :func:`toy_rl.rl.rollout.make_batch` does, train mode) and returns those log-probs:
  on-policy the ratio is exactly 1. The mean gap it replaced is read by :meth:`HFPolicy.pop_logp_gap`. The
  answers an update trains on at once (``sample``'s ``rescore_from``) skip this: their update's first scoring
  pass is the same forward, and its log-probs become their old log-probs (:func:`toy_rl.rl.loop._update`).
  Base weights and activations are bf16; the adapters, AdamW's state, the softmax, the
  log-probs, the ratios and the loss stay float32 (``score`` upcasts the logits).

Sampling is a hand-written KV-cache loop rather than ``model.generate``: it takes
a ``torch.Generator`` (generate does not), and is pure temperature sampling
(no top-k, no top-p, no repetition penalty: what generate does with
``top_k=0, top_p=1.0``). ``temperature=0`` is greedy; the log-prob recorded then
is the temperature-1 log-prob of the chosen token (as rung 2 does). After the prompts' prefill, a Llama on the
CPU decodes on :mod:`toy_rl.lm.decode`'s hand-written step (LoRA merged, a preallocated KV cache, stopped rows
dropped): same tokens and log-probs, faster; anything else, or ``lean_decode=False``, runs the HF forward.
"""
from __future__ import annotations

from contextlib import nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from ..arithmetic.model.gpt import distinct_rows
from ..arithmetic.model.tokenizer import left_pad
from . import attention, decode
from .forward import forward_kwargs, new_cache, unique_rows
from .load import _dtype, resolve_dtype
from .logprob import head_logp, token_logp
from .lora import cast_base, low_precision_products
from . import packing
from .prefill import prefill, prefix_once
from .prompts import chat_messages, render_chat

FORMATS = ("plain", "chat")
HEAD_LAST = ("llama", "qwen2", "qwen3", "mistral")   # model types whose forward ends with the LM head


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch: each row's first real token at 0 (padding clamped to 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


class HFPolicy:
    """``HFPolicy(model, tokenizer, stop_ids=None, prompt_format="plain", system_prompt=None)``.

    model:
        a causal LM, usually wrapped by :func:`toy_rl.lm.lora.add_lora` (then only the
        adapters are trainable; ``get_weights`` / ``set_weights`` move only them).
    stop_ids:
        token ids that end an answer (the stop token is kept as the answer's last token, so
        the model learns to stop). Default: the end-of-text id(s) (``<|im_end|>``, id 2 in
        SmolLM2) and, for plain prompts, every token that writes a newline (``"\n"`` is id 198
        in SmolLM2, ``"\n\n"`` id 1116; 129 such tokens in all) -- a plain few-shot prompt
        never makes the model emit end-of-text; it writes the next example instead.
    prompt_format:
        ``"plain"``: ``encode`` tokenizes the text as it is. ``"chat"``: ``encode`` treats the
        text as the user's message and renders the tokenizer's chat template around it
        (with ``system_prompt`` if given; SmolLM2's template adds its own default one).
    max_batch:
        rows per forward in ``sample`` (larger batches are split).
    share_prompts:
        in ``score``, run each distinct prompt through the model once and reuse its KV cache
        for every answer to it (a GRPO group of G answers shares one prompt): about twice as
        fast on CPU for short answers, same numbers up to float rounding. ``sample`` always
        shares the prompt's forward.
    rescore, rescore_rows:
        whether ``sample`` (at temperature > 0) returns the log-probs of ``score`` instead of its
        own (see the module docstring); None: when the base weights are not float32. The rescoring
        forward takes ``rescore_rows`` answers at a time (set it to the update's micro-batch; None:
        all at once, as the update without micro-batches scores).
    lean_decode:
        after the prefill, decode on :func:`toy_rl.lm.decode.step` (same distribution, same log-probs; 1.9x
        faster in float32 and 2.2x in bf16 on SmolLM2 with 40-token answers, bench/README.md). It falls back to
        the HF forward by itself where it cannot run: a model that is not a Llama, not on the CPU, with gradient
        checkpointing on (rung 4's memory-lean presets), or with DoRA / LoRA outside the decoder projections;
        :meth:`lean_reason` says why.
    head_on_answers:
        in ``score``, run the LM head and the log-softmax on the real answer tokens only (not on padding), where
        the model's forward ends with its head (:data:`HEAD_LAST`), in less time. The log-probs are the same bit
        for bit; the gradients only up to rounding (the head's backward multiplies a matrix of another shape), and
        AdamW's first steps make rounding in near-zero gradients into whole steps, so a run parts from the one it
        would have been after its first update (``bench/bench_update_cuts.py --run``). A run records it in
        config.json (``"lm_head": "answer tokens"``).
    hold_graphs:
        in an update in micro-batches (:func:`toy_rl.rl.loop._accumulate`), BAPO needs the whole batch's log-probs
        to search its bounds before any micro-batch's loss: keep each micro-batch's autograd graph from that
        forward for its backward (one forward per answer, not a no-grad one and a second with grad). Same
        numbers; it holds every micro-batch's activations at once (bench/bench_update_cuts.py prints how much),
        which is what micro-batches are there to avoid: off by default.
    pack_answers:
        with ``head_on_answers`` in effect, ``score`` lays each distinct prompt's answers end to end behind it,
        without padding (:mod:`toy_rl.lm.packing`): the same log-probs and gradients up to rounding, over real
        answer tokens only. A run records it in config.json (``"answers": "packed"``).
    share_prefix:
        where the distinct prompts of a batch begin alike (the same few-shot examples), run that prefix once and
        copy its keys and values to each prompt (:mod:`toy_rl.lm.prefill`), when sampling and when scoring packed
        answers, and once per update in micro-batches (:meth:`prefix_once`): the same numbers up to rounding. A run
        records it in config.json (``"prompt_prefix": "once"``).
    """

    sample_takes_rescore_from = True    # sample(rescore_from=k) leaves the first k answers to their update's scoring

    def __init__(self, model, tokenizer, stop_ids=None, prompt_format: str = "plain",
                 system_prompt: str | None = None, max_batch: int = 256, share_prompts: bool = True,
                 rescore: bool | None = None, rescore_rows: int | None = None, lean_decode: bool = True,
                 head_on_answers: bool = True, hold_graphs: bool = False, pack_answers: bool = True,
                 share_prefix: bool = True):
        if prompt_format not in FORMATS:
            raise ValueError(f"prompt_format must be one of {FORMATS}; got {prompt_format!r}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1; got {max_batch}")
        self.model, self.tokenizer = model, tokenizer
        self.prompt_format, self.system_prompt, self.max_batch = prompt_format, system_prompt, max_batch
        self.share_prompts = share_prompts
        self.stop_ids = sorted(set(self.default_stop_ids(tokenizer, model, prompt_format)
                                   if stop_ids is None else stop_ids))
        self._stop = set(self.stop_ids)
        if not self.stop_ids:
            raise ValueError("stop_ids is empty: answers would only end at max_new_tokens; "
                             "pass at least the end-of-text id")
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.stop_ids[0])
        self._cache_kw, self._keep_kw = forward_kwargs(model)
        self._adds_bos = self._tokenizer_adds_bos(tokenizer)
        self.rescore = self.dtype != torch.float32 if rescore is None else bool(rescore)
        self.rescore_rows = rescore_rows
        self.lean_decode, self._lean = lean_decode, None
        self.head_on_answers, self.hold_graphs, self.pack_answers = head_on_answers, hold_graphs, pack_answers
        self.share_prefix, self._held_prefix = share_prefix, None
        self._gap, self._head_hook, self._math_attention = [0.0, 0], None, False
        self._tune_for_dtype()

    @property
    def dtype(self) -> torch.dtype:
        """The base model's compute dtype (its frozen weights'; the adapters are float32)."""
        params = [p for p in self.model.parameters() if p.dtype.is_floating_point]
        return next((p for p in params if not p.requires_grad), params[0]).dtype

    def set_dtype(self, dtype) -> "HFPolicy":
        """Compute in ``dtype`` ("float32", "bfloat16", "auto", ...): the base weights are cast, the adapters stay
        float32, and outside float32 ``sample`` rescores its answers (``rescore``)."""
        dt = _dtype(resolve_dtype(dtype, self.device))
        cast_base(self.model, dt)
        self.rescore = dt != torch.float32
        self._tune_for_dtype()
        return self

    def _tune_for_dtype(self) -> None:
        """Two slow paths of torch's CPU kernels in bf16, avoided outside float32 (float32 is left as it was:
        the changes would move its results by ~3e-6). The LM head gets a contiguous input: HF slices the last
        positions for ``logits_to_keep``, and bf16 linear on that strided 3-D slice expands the weight per row
        (SmolLM2's head: 9.6 s instead of 0.15 s for 64 x 8 tokens). On a CPU, attention runs on SDPA's math
        backend: the flash kernel's bf16 backward was 2.8x slower (43 ms against 15 ms per SmolLM2 layer of
        an 8 x 8 update). There too, attention is :func:`toy_rl.lm.attention.grouped_attention` (the same float32
        arithmetic as the math backend, without repeating keys and values for each query head), and LoRA multiplies
        in bf16 (:func:`toy_rl.lm.lora.low_precision_products`; the adapters stay float32)."""
        head = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
        want = head is not None and self.dtype != torch.float32
        self._math_attention = self.dtype != torch.float32 and self.device.type == "cpu"
        attention.use_grouped(self.model, self._math_attention)
        low_precision_products(self.model, self._math_attention)
        if want and self._head_hook is None:
            self._head_hook = head.register_forward_pre_hook(lambda mod, args: (args[0].contiguous(), *args[1:]))
        elif not want and self._head_hook is not None:
            self._head_hook.remove()
            self._head_hook = None

    def lean_reason(self) -> str | None:
        """Why ``sample`` decodes on the HF forward, not on :mod:`toy_rl.lm.decode` (None: it uses the lean step)."""
        if not self.lean_decode:
            return "lean_decode is off"
        if _checkpointing(self.model):
            return "gradient checkpointing is on"
        return decode.unsupported(self.model)

    def add_logp_gap(self, sampler: torch.Tensor, scorer: torch.Tensor, mask: torch.Tensor) -> None:
        """Count the answer tokens (``mask``) whose sampler log-probs an update scored itself toward
        :meth:`pop_logp_gap`, as :meth:`sample`'s rescoring counts the rest."""
        real = mask.bool()
        self._gap[0] += float((sampler.double() - scorer.double()).abs()[real].sum())
        self._gap[1] += int(real.sum())

    def pop_logp_gap(self) -> float | None:
        """Mean |sampler log-prob - scorer log-prob| over the tokens rescored since the last call; None if none."""
        total, n = self._gap
        self._gap = [0.0, 0]
        return total / n if n else None

    # ---------------------------------------------------------------------------- text <-> ids
    @staticmethod
    def default_stop_ids(tokenizer, model=None, prompt_format: str = "plain") -> list[int]:
        ids = {tokenizer.eos_token_id}
        gen = getattr(model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        ids |= set(eos) if isinstance(eos, (list, tuple)) else {eos}
        im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
            ids.add(im_end)
        if prompt_format == "plain":       # every token that writes a newline: "\n", "\n\n", "\n   ", ...
            ids |= {i for i in range(len(tokenizer)) if "\n" in tokenizer.decode([i])}
        return sorted(i for i in ids if i is not None)

    @staticmethod
    def _tokenizer_adds_bos(tokenizer) -> bool:
        bos = tokenizer.bos_token_id
        return bos is not None and tokenizer("x", add_special_tokens=True).input_ids[:1] == [bos]

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def prompt_text(self, text: str) -> str:
        """What the model reads for ``text``: the text itself, or the chat template around it."""
        if self.prompt_format == "chat":
            return render_chat(self.tokenizer, chat_messages(text, system=self.system_prompt))
        return text

    def encode(self, text: str) -> list[int]:
        """Prompt ids. Special tokens written in the text (chat markers, a BOS the template put
        there) are read as such; a BOS is added only if the tokenizer normally adds one and the
        text does not already start with it (never twice)."""
        if not isinstance(text, str):
            raise TypeError(f"encode takes the prompt text (str); got {type(text).__name__}")
        full = self.prompt_text(text)
        ids = self.tokenizer(full, add_special_tokens=False).input_ids
        if self._adds_bos and ids[:1] != [self.tokenizer.bos_token_id]:
            ids = [self.tokenizer.bos_token_id] + ids
        if not ids:
            raise ValueError("empty prompt: the model needs at least one token to condition on")
        return ids

    def cut(self, ids) -> list[int]:
        """``ids`` up to and including the first stop token."""
        ids = list(ids)
        for i, t in enumerate(ids):
            if t in self._stop:
                return ids[:i + 1]
        return ids

    def decode(self, ids) -> str:
        """Answer text: the tokens before the first stop token (stop and special tokens dropped)."""
        ids = self.cut(ids)
        if ids and ids[-1] in self._stop:
            ids = ids[:-1]
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # ---------------------------------------------------------------------------- model calls
    def _forward(self, input_ids, attention_mask, cache=None, logits_to_keep: int = 0, body=None, position_ids=None):
        """The model's logits at the last ``logits_to_keep`` positions (0: all); with ``body`` (the decoder under
        the LM head, :meth:`_body_and_head`), that body's last hidden states there instead. Position ids from the
        (2-D) ``attention_mask`` unless given (a 4-D mask of who may attend whom needs them)."""
        kw = {self._cache_kw: cache, "use_cache": cache is not None}
        if body is None and self._keep_kw and logits_to_keep:
            kw[self._keep_kw] = logits_to_keep
        with sdpa_kernel(SDPBackend.MATH) if self._math_attention else nullcontext():
            out = (body or self.model)(input_ids=input_ids, attention_mask=attention_mask,
                                       position_ids=(positions(attention_mask)[:, -input_ids.shape[1]:]
                                                     if position_ids is None else position_ids), **kw)
        out = out.logits if body is None else out.last_hidden_state
        return out[:, -logits_to_keep:] if logits_to_keep else out

    @property
    def scores_answers_only(self) -> bool:
        """Whether ``score`` runs the LM head on real answer tokens only (``head_on_answers`` on a model it fits)."""
        return self._body_and_head() is not None

    def _body_and_head(self):
        """(decoder body, LM head) of a model whose forward is the body, then the head, then nothing (the model
        types in :data:`HEAD_LAST`), with ``head_on_answers`` on; else None."""
        if not self.head_on_answers:
            return None
        base = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        if getattr(getattr(base, "config", None), "model_type", None) not in HEAD_LAST:
            return None
        body, head = getattr(base, "model", None), base.get_output_embeddings()
        return None if body is None or head is None else (body, head)

    @torch.inference_mode()             # no autograd bookkeeping (it returns lists)
    def sample(self, prompts, max_new_tokens: int, temperature: float = 1.0, generator=None, rescore_from: int = 0):
        """Sample up to ``max_new_tokens`` tokens after each prompt (lists of ids).

        Returns one ``(tokens, logps, finished)`` per prompt, as Python lists: the tokens up to
        and including the first stop token, the log-prob each had under the distribution it
        was drawn from, and whether a stop token was produced. With ``rescore`` on, the log-probs of the
        answers from ``rescore_from`` on are the scorer's (the first ``rescore_from`` keep the sampler's: an
        on-policy update scores them itself, :class:`toy_rl.rl.sources.BatchSource`).
        """
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1; got {max_new_tokens}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy); got {temperature}")
        prompts = [list(p) for p in prompts]
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        limit = getattr(self.model.config, "max_position_embeddings", None)
        longest = max((len(p) for p in prompts), default=0)
        if limit is not None and longest + max_new_tokens > limit:
            raise ValueError(f"prompt of {longest} tokens + max_new_tokens={max_new_tokens} exceeds the "
                             f"model's context of {limit} tokens")
        was_training = self.model.training
        self.model.eval()
        try:
            self._lean = decode.weights(self.model) if self.lean_reason() is None else None   # LoRA merged once
            out = []
            for i in range(0, len(prompts), self.max_batch):
                out += self._sample_batch(prompts[i:i + self.max_batch], max_new_tokens, temperature, generator)
            if self.rescore and temperature > 0:
                out = out[:rescore_from] + self._rescore(prompts, out, temperature, rescore_from)
            return out
        finally:
            self._lean = None
            self.model.train(was_training)

    def _sample_batch(self, prompts, max_new_tokens, temperature, generator):
        if self._lean is not None:
            return decode.sample_batch(self, self._lean, prompts, max_new_tokens, temperature, generator)
        dev, B = self.device, len(prompts)
        # a GRPO group repeats each prompt G times: run the prompt through the model once, then
        # copy its KV cache to the G rows
        unique, where = unique_rows(prompts)
        ids, mask = left_pad(unique, self.device, self.pad_id)
        stop = torch.tensor(self.stop_ids, device=dev)
        tokens = torch.full((B, max_new_tokens), self.pad_id, dtype=torch.long, device=dev)
        logps = torch.zeros((B, max_new_tokens), dtype=torch.float32, device=dev)
        lengths = torch.zeros(B, dtype=torch.long, device=dev)
        finished = torch.zeros(B, dtype=torch.bool, device=dev)

        cache = new_cache(self.model)
        logits = self._forward(ids, mask, cache, logits_to_keep=1)[:, -1]      # prefill
        if len(unique) < B:
            where = torch.tensor(where, device=dev)
            cache.batch_select_indices(where)
            logits, mask = logits[where], mask[where]
        for t in range(max_new_tokens):
            alive = ~finished
            tok, logp = decode.next_token(logits, temperature, alive, generator)
            tok = torch.where(alive, tok, self.pad_id)
            tokens[:, t] = tok
            logps[:, t] = logp
            lengths += alive.long()
            finished |= alive & torch.isin(tok, stop)
            if bool(finished.all()) or t + 1 == max_new_tokens:
                break
            mask = torch.cat([mask, torch.ones((B, 1), dtype=mask.dtype, device=dev)], dim=1)
            logits = self._forward(tok[:, None], mask, cache, logits_to_keep=1)[:, -1]

        tokens, logps, lengths, finished = tokens.tolist(), logps.tolist(), lengths.tolist(), finished.tolist()
        return [(tokens[i][:n], logps[i][:n], done) for i, (n, done) in enumerate(zip(lengths, finished))]

    def _rescore(self, prompts, outs, temperature, first: int = 0):
        """``outs[first:]`` with every log-prob from ``score``, computed as the update will: prompts left-padded and
        answers right-padded as in :func:`toy_rl.rl.rollout.make_batch` (as wide as all of ``outs`` need), train mode,
        ``rescore_rows`` rows at a time. Adds the gap to the sampler's log-probs to what :meth:`pop_logp_gap` reports."""
        P, N = max(len(p) for p in prompts), max(max(len(t) for t, _, _ in outs), 1)
        prompts, outs = prompts[first:], outs[first:]
        if not outs:
            return []
        ids, mask, pad = [], [], self.pad_id
        for p, (t, _, _) in zip(prompts, outs):
            ids.append([pad] * (P - len(p)) + p + t + [pad] * (N - len(t)))
            mask.append([0] * (P - len(p)) + [1] * (len(p) + len(t)) + [0] * (N - len(t)))
        ids, mask = torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)
        rows, was_training = self.rescore_rows or len(ids), self.model.training
        self.model.train()
        try:
            with self.prefix_once(ids, mask, P):
                logp = torch.cat([self.score(ids[i:i + rows], mask[i:i + rows], P, temperature, entropy=False)[0]
                                  for i in range(0, len(ids), rows)]).tolist()
        finally:
            self.model.train(was_training)
        new = []
        for (toks, old, done), row in zip(outs, logp):
            row = row[:len(toks)]
            self._gap[0] += sum(abs(a - b) for a, b in zip(old, row))
            self._gap[1] += len(toks)
            new.append((toks, row, done))
        return new

    def score(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int, temperature: float = 1.0,
              entropy: bool = True):
        """Log-probs of ``input_ids[:, start:]`` (each given everything before it) and the entropy
        of each of those next-token distributions, both (B, L - start), float32, with autograd.

        One forward over the batch (left-padded prompts, right-padded answers), positions from
        ``attention_mask``; only the positions start-1 .. L-2 go through the LM head, and with
        ``head_on_answers`` (a Llama, Qwen or Mistral) only those of real answer tokens (mask 1): the head and
        the float32 softmax over the vocabulary (:mod:`toy_rl.lm.logprob`) are the update's largest tensors, and answers of one batch
        are mostly padding. There, with ``pack_answers``, the decoder skips the padding too: each distinct
        prompt once, its answers packed behind it (:mod:`toy_rl.lm.packing`). With ``temperature > 0`` the logits are divided by it, as in ``sample``. Entries
        at padding are 0 then, and otherwise computed too (finite): multiply by the response mask before using them.
        ``entropy=False`` skips the entropy (returned as None).
        """
        if input_ids.dim() != 2 or input_ids.shape != attention_mask.shape:
            raise ValueError(f"input_ids and attention_mask must both be (B, L); got {tuple(input_ids.shape)} "
                             f"and {tuple(attention_mask.shape)}")
        L = input_ids.shape[1]
        if not 1 <= start < L:
            raise ValueError(f"start must be in 1 .. {L - 1} (the first scored token needs a token "
                             f"before it); got {start}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0; got {temperature}")
        dev = self.device
        ids, mask = input_ids.to(dev), attention_mask.to(dev)
        # Gradient checkpointing in training mode drops the KV cache (transformers 5.x), so the
        # shared-prompt path would score answers without their prompt: use one full forward then.
        checkpointed = self.model.training and _checkpointing(self.model)
        body, head = self._body_and_head() or (None, None)
        out = None
        if head is not None and self.pack_answers and not checkpointed:
            out = self._packed_answer_states(ids, mask, start, body)      # real answer tokens only: (N, hidden)
        packed = out is not None
        if out is None and self.share_prompts and not checkpointed:
            out = self._shared_prompt_logits(ids, mask, start, body)
        if out is None:
            out = self._forward(ids, mask, logits_to_keep=L - start + 1, body=body)[:, :-1]
        targets, real = ids[:, start:], None
        if head is not None:            # the head on real answer tokens only: padding gets 0
            real = mask[:, start:].bool()
            logp, ent = head_logp(out if packed else out[real], head, targets[real], temperature, entropy)
        else:
            logp, ent = token_logp(out.flatten(0, 1), targets.flatten(), temperature, entropy)
            logp, ent = logp.view(targets.shape), None if ent is None else ent.view(targets.shape)
        return _placed(logp, real), None if ent is None else _placed(ent, real)

    def _shared_prompt_logits(self, ids, mask, start, body=None):
        """The logits ``score`` needs (with ``body``: the hidden states under them), computing each distinct
        prompt once (None if all differ).

        The distinct prompts (columns < start) go through the model once, with a KV cache;
        the cache is copied to every row that shares the prompt, and the answers (columns
        start .. L-2) run on top of it. Gradients flow through the copied cache into the
        prompt's forward. Same numbers as one full forward, up to float rounding.
        """
        rows, where = distinct_rows(ids[:, :start], mask[:, :start])    # (cheaper than torch.unique(dim=0))
        if len(rows) == ids.shape[0]:
            return None
        cache = new_cache(self.model)
        first = self._forward(ids[rows, :start], mask[rows, :start], cache, logits_to_keep=1, body=body)
        if ids.shape[1] - start == 1:
            return first[where]
        cache.batch_select_indices(where)
        rest = self._forward(ids[:, start:-1], mask[:, :-1], cache, body=body)
        return torch.cat([first[where], rest], dim=1)

    def prefix_once(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int):
        """A context in which the scoring passes of one update in micro-batches run the few-shot prefix its prompts
        share once, and its backward once (:func:`toy_rl.lm.prefill.prefix_once`)."""
        return prefix_once(self, input_ids, attention_mask, start)

    def _packed_answer_states(self, ids, mask, start, body):
        """The body's states that predict each real answer token (N, hidden), in the order of
        ``mask[:, start:].bool()``: each distinct prompt once, with a KV cache, then its answers packed after it
        without padding (:mod:`toy_rl.lm.packing`). None where answers are not contiguous."""
        if packing.answer_lengths(mask, start) is None:
            return None
        first, where = distinct_rows(ids[:, :start], mask[:, :start])
        lengths = mask[first, :start].sum(1).tolist()
        prompts = [row[start - n:] for row, n in zip(ids[first, :start].tolist(), lengths)]
        cache = new_cache(self.model)
        pre = prefill(self, prompts, cache, body, share=self.share_prefix)
        packed = packing.pack_answers(ids, mask, start, where, pre.keys, pre.lengths)
        if not torch.equal(packed.rows, torch.arange(len(prompts), device=ids.device)):
            cache.batch_select_indices(packed.rows)                 # each row continues its prompt's cache
        states = self._forward(packed.ids, packed.allowed, cache, body=body, position_ids=packed.positions)
        return torch.cat([pre.last, states.flatten(0, 1)])[packed.take]

    # ---------------------------------------------------------------------------- training state
    def _named_trainable(self):
        return [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The LoRA adapters (whatever has requires_grad): what the optimizer updates."""
        return [p for _, p in self._named_trainable()]

    def get_weights(self) -> dict[str, torch.Tensor]:
        """Copies (on the CPU) of the trainable weights only -- the adapters, not the base model."""
        return {n: p.detach().to("cpu", copy=True) for n, p in self._named_trainable()}

    @torch.no_grad()
    def set_weights(self, state: dict) -> None:
        """Load trainable weights saved by ``get_weights`` (same names and shapes, or ValueError)."""
        params = dict(self._named_trainable())
        if set(state) != set(params):
            missing, extra = sorted(set(params) - set(state)), sorted(set(state) - set(params))
            raise ValueError(f"weights do not match this policy's trainable parameters: missing "
                             f"{missing[:3]}{'...' if len(missing) > 3 else ''} ({len(missing)}), unexpected "
                             f"{extra[:3]}{'...' if len(extra) > 3 else ''} ({len(extra)})")
        for n, p in params.items():
            if tuple(state[n].shape) != tuple(p.shape):
                raise ValueError(f"{n}: shape {tuple(state[n].shape)} != {tuple(p.shape)}")
            p.copy_(state[n])

    def train(self):
        self.model.train()
        return self

    def eval(self):
        self.model.eval()
        return self


def _placed(values: torch.Tensor, real: torch.Tensor | None) -> torch.Tensor:
    """``values`` of the real answer tokens laid out as ``real`` (B, N), 0 at padding; as they are if ``real`` is None."""
    return values if real is None else values.new_zeros(real.shape).masked_scatter(real, values)


def _checkpointing(model) -> bool:
    """Whether activation (gradient) checkpointing is on; transformers 5 renamed the flag."""
    flag = getattr(model, "is_activation_checkpointing", None)
    return bool(flag if flag is not None else getattr(model, "is_gradient_checkpointing", False))
