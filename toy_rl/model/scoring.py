"""Score given tokens under the model: the log-probs the RL loss needs, in one forward pass."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def token_logprobs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, start: int,
                   temperature: float = 1.0, with_entropy: bool = False):
    """Log-probs of ``input_ids[:, start:]``, each given every token before it: shape (B, L - start).

    One forward over the whole (B, L) batch, positions from ``attention_mask``
    (so left-padded rows are scored at the same positions they were sampled at),
    then the logits at index t - 1 are gathered at token t. Entries whose
    token is padding are still computed; multiply by the mask before using them.

    ``temperature`` divides the logits first (use the sampling temperature to
    get the probabilities the sampler used). With ``with_entropy=True`` also
    returns the exact entropy (nats) of each of those next-token distributions,
    shape (B, L - start).
    """
    if not 1 <= start < input_ids.shape[1]:
        raise ValueError(f"start must be in 1 .. {input_ids.shape[1] - 1} (the first scored token needs "
                         f"a token before it); got {start}")
    logits = model(input_ids, attention_mask)[:, start - 1:-1].float()
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = F.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, input_ids[:, start:, None]).squeeze(-1)
    if not with_entropy:
        return logp
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy
