"""Notebook 05 · partial rollout: how old a group's tokens are, and the staleness numbers of a batch."""
import math


def group_token_ages(lengths, budget):
    """(mean age, oldest age) of a group's tokens when it is trained on, in policy versions.

    The group's answers (``lengths`` tokens each, EOS included) start together; every step writes up to
    ``budget`` more tokens of each unfinished answer, and the version moves on by one each step."""
    steps = [math.ceil(n / budget) for n in lengths]       # steps each answer needs
    trained_at = max(steps) - 1                            # the group waits for its longest answer
    ages = []
    for n in lengths:
        for i in range(n):
            written_at = i // budget                       # token i is written in step i // budget
            ages.append(trained_at - written_at)
    return sum(ages) / len(ages), max(ages)


def staleness_stats(versions, mask, current):
    """(staleness_mean, staleness_max, mixed share) of a batch: ``versions`` (B, N) is the version that wrote
    each token, ``mask`` (B, N) marks the answer tokens (the rest is padding), ``current`` trains on it."""
    real = mask.bool()
    age = current - versions[real]                         # padding left out
    mixed = [len(set(v[m].tolist())) > 1 for v, m in zip(versions, real)]
    return float(age.float().mean()), int(age.max()), sum(mixed) / len(mixed)
