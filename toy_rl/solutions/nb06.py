"""Notebook 06 · LoRA on a real LM: the adapted layer's forward, and the reward read from the model's text."""
import re


def lora_forward(x, W, A, B, alpha, r):
    """A LoRA-adapted linear layer (no bias): x W^T + (alpha / r) x A^T B^T.

    x: (..., in); W: (out, in) frozen; A: (r, in); B: (out, r)."""
    base = x @ W.T
    update = (x @ A.T) @ B.T                  # down to r dimensions, then back up to out
    return base + (alpha / r) * update


def answer_reward(completion, answer):
    """1.0 if the first integer on the completion's first line equals ``answer`` (int or text), else 0.0."""
    first_line = completion.split("<|im_end|>")[0].split("\n")[0]   # the reply ends at either
    found = re.search(r"-?\d+", first_line)
    if found is None:
        return 0.0
    return 1.0 if int(found.group()) == int(answer) else 0.0
