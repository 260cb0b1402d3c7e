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

:class:`Policy` writes the same interface as a ``typing.Protocol`` (runtime checkable:
``isinstance(p, Policy)`` tells whether ``p`` has every method; the signatures are for
readers and type checkers). :class:`toy_rl.arithmetic.policy.TinyPolicy` is rung 2's;
rungs 3–4 wrap a Hugging Face model with LoRA the same way.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Policy(Protocol):
    """The interface above, method by method."""
    pad_id: int

    @property
    def device(self) -> torch.device: ...

    def encode(self, text: str) -> list[int]:
        """Prompt token ids (chat template applied, if any)."""

    def decode(self, ids) -> str:
        """Answer text (stops at EOS)."""

    def sample(self, prompts: list[list[int]], max_new_tokens: int, temperature: float,
               generator: torch.Generator | None = None) -> list[tuple[list[int], list[float], bool]]:
        """One (tokens, logps, finished) per prompt; logps are the sampling distribution's log-probs
        of the sampled tokens; temperature 0 = greedy."""

    def score(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int,
              temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
        """(logp (B, N), entropy (B, N)): log-probs of input_ids[:, start:] and the entropy of each
        next-token distribution, with autograd; position ids from the mask."""

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """What the optimizer updates."""

    def get_weights(self) -> dict:
        """Trainable weights only (lag snapshots, checkpoints)."""

    def set_weights(self, state: dict) -> None:
        """Load weights saved by ``get_weights``."""

    def train(self): ...

    def eval(self): ...
