"""Notebook 07 · practitioners' questions: the gradient a token keeps, where an update sits in an epoch, the
sign-aware clip fractions, dual-clip, how stale asynchronous data is, and the entropy's gradient."""
import torch


def surrogate_grad_weight(ratio, adv, c_low, c_high):
    """∂/∂log π of min(r·A, clip(r, c_low, c_high)·A), per token: r·A, or 0 where the clip took over."""
    cut = ((ratio > c_high) & (adv > 0)) | ((ratio < c_low) & (adv < 0))   # the flat, clipped branch
    return torch.where(cut, torch.zeros_like(ratio), ratio * adv)          # d(r·A)/d log π = r·A


def minibatch_position(t, epochs, minibatches):
    """(epoch, mini-batch, age in updates) of update t when one rollout serves `epochs` passes of
    `minibatches` optimizer steps each (epochs outside, mini-batches inside)."""
    i = t % (epochs * minibatches)          # position inside the rollout's updates
    return i // minibatches, i % minibatches, i


def sign_aware_clip_fractions(ratio, adv, mask, c_low, c_high):
    """(low, high): the shares of the masked tokens clipped below (A < 0, r < c_low) and above (A > 0, r > c_high)."""
    m = mask > 0
    n = int(m.sum())                                   # masked tokens: padding does not count
    low = int(((ratio < c_low) & (adv < 0) & m).sum()) / n
    high = int(((ratio > c_high) & (adv > 0) & m).sum()) / n
    return low, high


def dual_clip_surrogate(ratio, adv, c_low, c_high, c):
    """Per token: the PPO surrogate min(r·A, clip(r)·A), and for A < 0 at least c·A (dual-clip)."""
    ppo = torch.minimum(ratio * adv, torch.clamp(ratio, c_low, c_high) * adv)
    return torch.where(adv < 0, torch.maximum(ppo, c * adv), ppo)


def async_ages(t, updates_per_rollout, lag, recompute_old):
    """(data age, ratio age) of update t: how many updates old the sampling policy and π_old are, when each
    rollout serves `updates_per_rollout` updates and was generated `lag` rollouts behind."""
    rollout, i = divmod(t, updates_per_rollout)
    sampled_at = max(0, (rollout - lag) * updates_per_rollout)   # the weights the generator had
    data_age = t - sampled_at
    return data_age, (i if recompute_old else data_age)


def entropy_gradient(logits):
    """∂H/∂z for H = −Σ π log π, π = softmax(z) over the last axis: −π·(log π + H)."""
    logp = torch.log_softmax(logits, -1)
    p = logp.exp()
    H = -(p * logp).sum(-1, keepdim=True)
    return -p * (logp + H)
