"""What the RL loop needs from a model: a small interface every rung implements.

A *policy* wraps a model and its tokenizer:

    encode(text) -> list[int]                  prompt token ids (chat template applied, if any)
    decode(ids) -> str                         answer text (stops at EOS)
    pad_id, device
    sample(prompts: list[list[int]], max_new_tokens, temperature, generator)
        -> list of (tokens, logps, finished)   one entry per prompt; logps are the
                                               sampling distribution's log-probs of the
                                               sampled tokens; temperature 0 = greedy
    score(input_ids, attention_mask, start, temperature)
        -> (logp (B, N), entropy (B, N))       log-probs of input_ids[:, start:] and the
                                               entropy of each next-token distribution,
                                               with autograd; position ids from the mask
    trainable_parameters()                     what the optimizer updates
    get_weights() / set_weights(state)         trainable weights only (lag snapshots, checkpoints)
    train() / eval()

:class:`toy_rl.arithmetic.policy.TinyPolicy` is rung 2's; rungs 3–4 wrap a
Hugging Face model with LoRA the same way.
"""
