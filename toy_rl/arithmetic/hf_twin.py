"""Rung 2's GPT and character vocabulary as Hugging Face objects (nothing downloaded).

:func:`char_tokenizer` is :mod:`toy_rl.arithmetic.model.tokenizer`'s vocabulary as a
``PreTrainedTokenizerFast`` (same ids, BOS added); :func:`gpt2_twin` copies a rung-2 :class:`GPT` into a
``GPT2LMHeadModel`` computing the same function. The TRL benchmarks (bench/bench_vs_trl.py) and the TRL
plug-in's tests (tests/test_integrations_trl.py) use them. Needs transformers (the ``llm`` extra).
"""
from __future__ import annotations

from toy_rl.arithmetic.model import tokenizer as chars


def char_tokenizer():
    """toy_rl's character vocabulary as a PreTrainedTokenizerFast (ids identical, BOS added, nothing downloaded)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    tk = Tokenizer(models.WordLevel({t: i for i, t in enumerate(chars.VOCAB)}, unk_token=chars.PAD))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")      # one token per character
    tk.decoder = decoders.Fuse()                                                  # join without spaces
    tk.post_processor = processors.TemplateProcessing(single=f"{chars.BOS} $A",
                                                      special_tokens=[(chars.BOS, chars.BOS_ID)])
    tk.add_special_tokens(list(chars.SPECIALS))
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=chars.BOS, eos_token=chars.EOS,
                                   pad_token=chars.PAD, padding_side="left")


def gpt2_twin(gpt):
    """A transformers GPT2LMHeadModel computing the same function as toy_rl's GPT ``gpt`` (weights copied)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    c = gpt.config
    cfg = GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.d_model, n_layer=c.n_layer,
                     n_head=c.n_head, activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=chars.BOS_ID, eos_token_id=chars.EOS_ID, pad_token_id=chars.PAD_ID,
                     tie_word_embeddings=True)
    hf = GPT2LMHeadModel(cfg)
    src = gpt.state_dict()
    out = {"transformer.wte.weight": src["wte.weight"], "transformer.wpe.weight": src["wpe.weight"],
           "transformer.ln_f.weight": src["ln_f.weight"], "transformer.ln_f.bias": src["ln_f.bias"]}
    names = {"ln1": "ln_1", "ln2": "ln_2", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj",
             "mlp.0": "mlp.c_fc", "mlp.2": "mlp.c_proj"}
    for i in range(c.n_layer):
        for ours, theirs in names.items():
            w, b = src[f"blocks.{i}.{ours}.weight"], src[f"blocks.{i}.{ours}.bias"]
            linear = not ours.startswith("ln")
            out[f"transformer.h.{i}.{theirs}.weight"] = w.t().contiguous() if linear else w   # Conv1D is (in, out)
            out[f"transformer.h.{i}.{theirs}.bias"] = b
    missing, unexpected = hf.load_state_dict(out, strict=False)
    if unexpected or [m for m in missing if m != "lm_head.weight"]:
        raise RuntimeError(f"weight copy failed: missing {missing}, unexpected {unexpected}")
    hf.tie_weights()
    hf.generation_config.update(bos_token_id=chars.BOS_ID, eos_token_id=chars.EOS_ID, pad_token_id=chars.PAD_ID)
    return hf.eval()
