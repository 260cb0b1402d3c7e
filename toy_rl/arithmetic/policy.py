"""Rung 2's policy: the small character-level GPT behind the interface of :mod:`toy_rl.rl.policy`."""
from __future__ import annotations

import torch

from .model import tokenizer
from .model.sampling import sample
from .model.scoring import token_logprobs


class TinyPolicy:
    pad_id = tokenizer.PAD_ID

    def __init__(self, model):
        self.model = model

    @property
    def device(self) -> torch.device:
        return self.model.device

    def encode(self, text: str) -> list[int]:
        return [tokenizer.BOS_ID] + tokenizer.encode(text)

    def decode(self, ids) -> str:
        return tokenizer.decode(ids)

    def sample(self, prompts, max_new_tokens: int, temperature: float, generator=None):
        # a GRPO group asks one prompt G times: left-pad each distinct prompt once, and tell the
        # sampler which prompt every answer continues (it runs each prompt once)
        seen = {}
        rows = [seen.setdefault(tuple(p), len(seen)) for p in prompts]
        ids, mask = tokenizer.left_pad(list(seen), device=self.device)
        rows = torch.tensor(rows, device=self.device)
        s = sample(self.model, ids, mask, max_new_tokens, temperature, generator=generator, rows=rows)
        lengths = s.mask.sum(1).tolist()
        return [(t[:n], lp[:n], done) for t, lp, n, done in
                zip(s.tokens.tolist(), s.logp.tolist(), lengths, s.finished.tolist())]

    def score(self, input_ids, attention_mask, start: int, temperature: float = 1.0):
        dev = self.device
        return token_logprobs(self.model, input_ids.to(dev), attention_mask.to(dev), start,
                              temperature=temperature if temperature > 0 else 1.0, with_entropy=True)

    def trainable_parameters(self):
        return [p for p in self.model.parameters() if p.requires_grad]

    def get_weights(self) -> dict:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def set_weights(self, state: dict) -> None:
        self.model.load_state_dict(state)

    def train(self):
        self.model.train()

    def eval(self):
        self.model.eval()
