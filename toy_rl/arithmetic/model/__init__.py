"""Rung 2's model: a character tokenizer, a small GPT with a KV cache, sampling and scoring.

The RL loop needs only these names:

    GPT, ModelConfig                      the model: model(input_ids, attention_mask) -> logits
    token_logprobs(model, ids, mask, start)   log-probs of ids[:, start:] (one forward; shared prompts run once)
    sample(model, prompt_ids, prompt_mask, max_new_tokens, temperature, eos_id, generator, rows=None) -> Samples
    encode, decode, encode_prompts        text <-> token ids (repad_left: re-left-pad prompt + partial answer)
    save_checkpoint, load_checkpoint, load_into, read_meta, resolve_device
"""
from .checkpoint import load_checkpoint, load_into, read_meta, save_checkpoint
from .device import resolve_device
from .gpt import GPT, KVCache, ModelConfig, position_ids_from_mask
from .sampling import Samples, sample
from .scoring import token_logprobs
from .tokenizer import (BOS_ID, EOS_ID, PAD_ID, VOCAB, VOCAB_SIZE, decode, encode, encode_prompts, left_pad,
                        repad_left)

__all__ = ["GPT", "KVCache", "ModelConfig", "position_ids_from_mask", "Samples", "sample", "token_logprobs",
           "save_checkpoint", "load_checkpoint", "load_into", "read_meta", "resolve_device",
           "BOS_ID", "EOS_ID", "PAD_ID", "VOCAB", "VOCAB_SIZE", "decode", "encode", "encode_prompts", "left_pad",
           "repad_left"]
