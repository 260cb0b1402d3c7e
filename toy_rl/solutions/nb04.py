"""Notebook 04 · the arithmetic transformer: scoring answer tokens from the logits, and averaging over the mask."""
import torch


def token_logprobs_from_logits(logits, input_ids, start, temperature=1.0):
    """Log-probs of input_ids[:, start:] from a model's logits (B, L, V): (B, L - start)."""
    predicting = logits[:, start - 1:-1] / temperature        # the logits at t - 1 predict token t
    logp_all = torch.log_softmax(predicting, dim=-1)          # normalise over the vocabulary
    answer = input_ids[:, start:]
    return logp_all.gather(-1, answer.unsqueeze(-1)).squeeze(-1)


def masked_token_mean(values, mask, agg="token-mean"):
    """Average per-token values (B, T) over the mask: "token-mean" or "seq-mean-token-mean"."""
    kept = values * mask                                      # padding contributes nothing
    if agg == "token-mean":
        return kept.sum() / mask.sum()                        # every answer token weighs the same
    n_tokens = mask.sum(-1)
    has_tokens = n_tokens > 0                                 # an empty sequence has no mean: leave it out
    per_sequence = kept.sum(-1)[has_tokens] / n_tokens[has_tokens]
    return per_sequence.mean()                                # every sequence weighs the same
