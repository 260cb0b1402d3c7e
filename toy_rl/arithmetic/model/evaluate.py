"""Answer prompts with the model and score them with a task's reward (batched sampling)."""
from __future__ import annotations

import torch

from .sampling import sample
from .tokenizer import decode, encode_prompts


def complete(model, prompts: list[str], max_new_tokens: int, temperature: float = 0.0,
             generator: torch.Generator | None = None, batch_size: int = 256) -> list[str]:
    """The model's completion of each prompt as text (greedy when temperature is 0)."""
    out = []
    for i in range(0, len(prompts), batch_size):
        ids, mask = encode_prompts(prompts[i:i + batch_size], device=model.device)
        s = sample(model, ids, mask, max_new_tokens, temperature=temperature, generator=generator)
        out += [decode(row) for row in s.tokens.tolist()]
    return out


def evaluate(model, task, problems, greedy: bool = True, temperature: float = 1.0,
             seed: int = 0, batch_size: int = 256) -> float:
    """Mean reward (= accuracy) of the model on ``problems``: greedy, or sampled at ``temperature``
    with a torch generator seeded by ``seed`` (repeatable). Answers get task.max_answer_chars + 1 tokens."""
    from ..tasks import get_task
    task = get_task(task)
    generator = None if greedy else torch.Generator(device=model.device).manual_seed(seed)
    answers = complete(model, [p.prompt for p in problems], task.max_answer_chars + 1,
                       temperature=0.0 if greedy else temperature, generator=generator, batch_size=batch_size)
    return sum(task.reward(p, a) for p, a in zip(problems, answers)) / len(problems)
