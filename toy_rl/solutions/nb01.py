"""Notebook 01 · the Entropy-Clip Rule: the first-order prediction, and which tokens keep their gradient."""
import torch


def entropy_change_prediction(logits, delta_z):
    """ΔH ≈ −Cov_{a∼π}(log π(a), Δz_a), π = softmax(logits); logits and delta_z are (K,) tensors."""
    log_pi = torch.log_softmax(logits, dim=-1)
    pi = log_pi.exp()
    centred_log_pi = log_pi - (pi * log_pi).sum()
    centred_dz = delta_z - (pi * delta_z).sum()
    return -(pi * centred_log_pi * centred_dz).sum()


def clip_mask(ratio, adv, c_low, c_high):
    """True where a token keeps its gradient under min(r·A, clip(r, c_low, c_high)·A) (X = 1)."""
    clipped = ((adv > 0) & (ratio > c_high)) | ((adv < 0) & (ratio < c_low))
    return ~clipped
