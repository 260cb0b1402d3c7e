"""Notebook 02 · the off-policy bandit: group advantages, and how old the data of an update is."""


def group_advantages(rewards, kind="grpo"):
    """Advantages for rewards shaped (n_groups, G), one prompt's group per row: "grpo" or "drgrpo"."""
    centred = rewards - rewards.mean(-1, keepdim=True)
    if kind == "drgrpo":
        return centred                                           # Dr. GRPO: no division by the std
    return centred / (rewards.std(-1, keepdim=True) + 1e-6)      # GRPO: unbiased std (G − 1), + eps


def data_age(t, staleness, mode):
    """(age of the batch used in update t, batches sampled so far) for update t = 0, 1, 2, ..."""
    if mode == "reuse":                    # one batch serves staleness + 1 updates
        per_batch = staleness + 1
        return t % per_batch, t // per_batch + 1
    return min(t, staleness), t + 1        # lag: sampled by the policy of `staleness` updates ago
