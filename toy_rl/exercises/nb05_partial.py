"""Exercises of notebook 05 (partial rollout): how old a group's tokens are when it is trained on, and the
staleness numbers the loop records for a batch (mean and oldest token age, share of answers mixing versions)."""
from __future__ import annotations

import math

import torch

from . import register
from .framework import Case, Exercise, Mistake, close

NB = "05_partial_rollout"


# ----------------------------------------------------------------------------- the ages of one group's tokens

def _ages_cases():
    cases = [
        Case("budget covers the answer", ([5, 5, 5, 5], 8),
             note="the whole answer is written in one step by the version that trains on it: on-policy"),
        Case("one answer, two steps", ([16, 16], 8),
             note="tokens 0-7 are written one step before tokens 8-15, which are fresh"),
        Case("a partly filled last step", ([12, 12], 8),
             note="an answer of 12 tokens at budget 8 takes 2 steps: 8 tokens, then 4"),
        Case("a length that is a multiple of the budget", ([24, 24], 8),
             note="24 tokens at budget 8: exactly 3 steps, not 4"),
        Case("the group waits for its longest answer", ([4, 20], 8),
             note="a group is trained on only when all its answers have finished: the short answer waits"),
        Case("budget 1: every token a new version", ([3, 5], 1)),
        Case("notebook 05's scratchpad answers", ([38, 40, 41, 43], 8)),
    ]
    g = torch.Generator().manual_seed(501)
    for i in range(6):
        G = int(torch.randint(2, 9, (1,), generator=g))
        lengths = torch.randint(1, 50, (G,), generator=g).tolist()
        budget = int(torch.randint(1, 17, (1,), generator=g))
        cases.append(Case(f"random group #{i + 1} (G = {G}, budget {budget})", (lengths, budget), random=True))
    return cases


def _ages(lengths, budget, trained_at):
    return [trained_at(n) - i // budget for n in lengths for i in range(n)]


def _mean_max(ages):
    return sum(ages) / len(ages), max(ages)


def _own_finish(lengths, budget):
    return _mean_max(_ages(lengths, budget, lambda n: math.ceil(n / budget) - 1))


def _counts_training_step(lengths, budget):
    last = max(math.ceil(n / budget) for n in lengths)
    return _mean_max(_ages(lengths, budget, lambda n: last))


def _floor_steps(lengths, budget):
    last = max(n // budget for n in lengths)
    return _mean_max(_ages(lengths, budget, lambda n: last))


def _answer_mean_ages(lengths, budget):
    last = max(math.ceil(n / budget) for n in lengths) - 1
    means = [sum(last - i // budget for i in range(n)) / n for n in lengths]
    return sum(means) / len(means), last


def _halfway(lengths, budget):
    last = max(math.ceil(n / budget) for n in lengths) - 1
    return last / 2, last


class _Scripted:
    """A policy that writes each answer up to a fixed length (the length is the answer's prompt id)."""

    def sample(self, contexts, max_new_tokens, temperature=1.0, generator=None):
        out = []
        for ctx in contexts:
            target, written = ctx[0], len(ctx) - 1
            k = min(max_new_tokens, target - written)
            out.append(([1] * k, [0.0] * k, written + k >= target))
        return out


def rollout_versions(lengths, budget):
    """Write one group of answers of these lengths with :class:`toy_rl.rl.rollout.RolloutPool` at this budget,
    the version moving on by one each step (as the loop's does); return (version that trains on it, the
    version of every token, answer by answer)."""
    from ..rl.rollout import Answer, Group, RolloutPool
    pool = RolloutPool(max(2, len(lengths)), max(lengths), budget)
    pool.groups.append(Group(None, [Answer([n]) for n in lengths]))
    for version in range(10 * max(lengths) + 1):
        pool.generate(_Scripted(), version)
        done = pool.pop_finished()
        if done:
            return version, [a.version for a in done[0].answers]
    raise RuntimeError("the group never finished")


def _like_the_rollout_pool(fn):
    g = torch.Generator().manual_seed(505)
    groups = [([38, 40, 41, 43], 8), ([43, 43], 4), ([3, 9, 27], 5)]
    groups += [(torch.randint(1, 40, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist(),
                int(torch.randint(1, 12, (1,), generator=g))) for _ in range(5)]
    for lengths, budget in groups:
        now, versions = rollout_versions(lengths, budget)
        ages = [now - v for vs in versions for v in vs]
        ok, detail = close()(_mean_max(ages), fn(list(lengths), budget))
        if not ok:
            return False, f"for lengths {lengths} at budget {budget} RolloutPool records other ages: {detail}"
    return True, ("RolloutPool (toy_rl.rl.rollout), writing groups of these lengths step by step, records the same "
                  f"ages on {len(groups)} more groups")


# ----------------------------------------------------------------------------- the staleness numbers of a batch

def _batch(rows, current, width=None):
    """Right-padded (versions, mask) from per-answer version lists (padding: version 0, mask 0)."""
    width = width or max(len(r) for r in rows)
    versions = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width)
    for i, r in enumerate(rows):
        versions[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1.0
    return versions, mask, current


def _stats_cases():
    scratch = [v for v in range(6, 11) for _ in range(8)] + [11, 11, 11]      # 43 tokens, budget 8, v6 -> v11
    cases = [
        Case("on-policy", _batch([[5, 5, 5], [5, 5, 5, 5]], 5),
             note="every token written by the version that trains on it: age 0, nothing mixed"),
        Case("one answer, two versions", _batch([[3, 3, 4, 4]], 4)),
        Case("stale but not mixed", _batch([[2, 2, 2], [2, 2, 2]], 6),
             note="reuse staleness: every token 4 versions old, but each answer has a single version"),
        Case("a short answer padded on the right", _batch([[7, 7, 8, 8, 9], [9, 9]], 9),
             note="padding has version 0 and mask 0: it is not part of any answer"),
        Case("notebook 05's v6 → v11 answer, trained at v11", _batch([scratch, [9, 9, 10, 10, 11]], 11)),
        Case("half the answers mixed", _batch([[0, 1], [1, 1], [0, 0, 1, 1], [1]], 2)),
    ]
    g = torch.Generator().manual_seed(502)
    for i in range(6):
        B, budget = int(torch.randint(1, 9, (1,), generator=g)), int(torch.randint(1, 9, (1,), generator=g))
        current = int(torch.randint(35, 60, (1,), generator=g))
        rows = []
        for _ in range(B):
            n = int(torch.randint(1, 30, (1,), generator=g))
            first = current - int(torch.randint(0, 5, (1,), generator=g)) - (n - 1) // budget
            rows.append([max(first, 0) + j // budget for j in range(n)])
        cases.append(Case(f"random batch #{i + 1} ({B} answers, budget {budget})", _batch(rows, current),
                          random=True))
    return cases


def _padding_counted(versions, mask, current):
    age = current - versions
    mixed = [len(set(v.tolist())) > 1 for v in versions]
    return float(age.float().mean()), int(age.max()), sum(mixed) / len(mixed)


def _mixed_with_padding(versions, mask, current):
    real = mask.bool()
    age = current - versions[real]
    mixed = [len(set(v.tolist())) > 1 for v in versions]
    return float(age.float().mean()), int(age.max()), sum(mixed) / len(mixed)


def _version_not_age(versions, mask, current):
    real = mask.bool()
    mixed = [len(set(v[m].tolist())) > 1 for v, m in zip(versions, real)]
    return float(versions[real].float().mean()), int(versions[real].max()), sum(mixed) / len(mixed)


def _mean_of_answer_means(versions, mask, current):
    real = mask.bool()
    per_answer = [float((current - v[m]).float().mean()) for v, m in zip(versions, real)]
    mixed = [len(set(v[m].tolist())) > 1 for v, m in zip(versions, real)]
    return sum(per_answer) / len(per_answer), int((current - versions[real]).max()), sum(mixed) / len(mixed)


def _newest_token(versions, mask, current):
    real = mask.bool()
    age = current - versions[real]
    mixed = [len(set(v[m].tolist())) > 1 for v, m in zip(versions, real)]
    return float(age.float().mean()), int(age.min()), sum(mixed) / len(mixed)


def _mixed_count(versions, mask, current):
    real = mask.bool()
    age = current - versions[real]
    mixed = [len(set(v[m].tolist())) > 1 for v, m in zip(versions, real)]
    return float(age.float().mean()), int(age.max()), sum(mixed)


def _like_the_loop_logs(fn):
    """Groups written by RolloutPool in a stream (a pool refilled every step, as BatchSource does), laid out by
    make_batch: the student's numbers vs those the RL loop logs (toy_rl.rl.loop)."""
    from ..rl.loop import batch_metrics
    from ..rl.rollout import Answer, Group, RolloutPool, make_batch
    g = torch.Generator().manual_seed(506)
    pool, checked = RolloutPool(4, 43, 8), 0
    for version in range(40):
        while len(pool.groups) < 6:
            lengths = torch.randint(30, 44, (4,), generator=g).tolist()
            pool.groups.append(Group(None, [Answer([n]) for n in lengths]))
        pool.generate(_Scripted(), version)
        done = pool.pop_finished()
        if not done:
            continue
        batch = make_batch(done, lambda problem, text: float(len(text) % 2), lambda ids: "x" * len(ids), 0)
        logged = batch_metrics(batch, version)
        expected = (logged["staleness_mean"], logged["staleness_max"], logged["mixed_versions"])
        ok, detail = close(rtol=1e-6, atol=1e-9)(expected, fn(batch.version.clone(), batch.response_mask.clone(),
                                                                version))
        if not ok:
            return False, f"on a batch of the RL loop (version {version}) you differ from what it logs: {detail}"
        checked += 1
    return True, (f"on {checked} batches written by RolloutPool at budget 8 and laid out by make_batch, your "
                  "numbers are the staleness_mean, staleness_max and mixed_versions the RL loop logs")


register(
    Exercise(
        name="group_token_ages", notebook=NB,
        title="partial rollout: the mean and oldest age of a group's tokens when it is trained on",
        solution="toy_rl.solutions.nb05:group_token_ages",
        cases=_ages_cases,
        nudge="token i of an answer is written in step i // budget (counting from 0); an answer of n tokens "
              "needs ceil(n / budget) steps, and the group is trained in the step its longest answer finishes. "
              "A token's age is the number of steps between the two. Average over every token of the group.",
        mistakes=(
            Mistake(_own_finish, "a group is trained on only once *all* its answers have finished (GRPO compares "
                                 "them): a short answer waits for the longest, and its tokens keep ageing."),
            Mistake(_counts_training_step, "the step that writes an answer's last tokens also trains on it: those "
                                           "tokens are age 0, so the oldest is (steps needed − 1), not steps needed."),
            Mistake(_floor_steps, "an answer of n tokens needs ceil(n / budget) steps: when n is a multiple of the "
                                  "budget the last step is full, there is no extra one (n // budget overcounts)."),
            Mistake(_answer_mean_ages, "average over every token of the group (what the loss sees), not over "
                                           "answers: a long answer has more tokens, and they weigh more."),
            Mistake(_halfway, "the mean age is not simply half the oldest: a last step that writes only a few "
                              "tokens, and short answers that wait, shift it. Count the tokens per step."),
        ),
        compare=close(rtol=1e-9, atol=1e-12),
        extra=_like_the_rollout_pool,
    ),
    Exercise(
        name="staleness_stats", notebook=NB,
        title="a batch's staleness_mean, staleness_max and share of answers that mix policy versions",
        solution="toy_rl.solutions.nb05:staleness_stats",
        cases=_stats_cases,
        nudge="a token's age is current − the version that wrote it. Over the answer tokens only (mask 1): the "
              "mean age and the largest; and the share of answers (rows) whose answer tokens carry more than "
              "one distinct version. Return the three as a tuple.",
        mistakes=(
            Mistake(_padding_counted, "leave the padding out (mask 0): its version is 0, which makes it look "
                                      "ancient and every padded answer look mixed."),
            Mistake(_mixed_with_padding, "your ages are right, but whether an answer mixes versions must be read "
                                         "from its answer tokens only: padding's version 0 makes a padded answer "
                                         "look mixed."),
            Mistake(_version_not_age, "the age is current − version (how many versions ago the token was written), "
                                      "not the version itself."),
            Mistake(_mean_of_answer_means, "staleness_mean is a mean over tokens (every trained token weighs the "
                                           "same, as in the token-mean loss), not a mean of per-answer means."),
            Mistake(_newest_token, "staleness_max is the age of the *oldest* token: the smallest version, the "
                                   "largest age."),
            Mistake(_mixed_count, "return the *share* of answers that mix versions (divide by the number of "
                                  "answers), not their count."),
        ),
        compare=close(rtol=1e-9, atol=1e-12),
        extra=_like_the_loop_logs,
    ),
)
