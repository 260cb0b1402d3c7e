"""Rollouts: groups of answers being written, and the training batch made from finished groups.

Every token keeps the log-prob it had under the policy that sampled it and that
policy's version (the number of updates it had seen). The ratio in the loss
always uses these recorded behaviour log-probs (docs/protocol.md,
section 4). With a per-step token budget (partial rollout), an answer that is
not finished stays in the pool and the next step resumes it under a newer
policy, so one answer can mix policy versions.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import SimpleNamespace
from typing import NamedTuple

import torch

from ..advantages import group_advantages
from .tasks import Problem


@dataclass
class Answer:
    """One answer in progress."""
    prompt_ids: list
    tokens: list = field(default_factory=list)
    logp: list = field(default_factory=list)        # behaviour log-prob of each token
    version: list = field(default_factory=list)     # policy version that sampled each token
    finished: bool = False


@dataclass
class Group:
    """The G answers to one prompt (a GRPO group)."""
    problem: object
    answers: list

    @property
    def finished(self) -> bool:
        return all(a.finished for a in self.answers)


class Batch(NamedTuple):
    """Finished groups laid out for one update: prompts left-padded, answers right-padded."""
    input_ids: torch.Tensor       # (B, P + N)
    attention_mask: torch.Tensor  # (B, P + N)
    start: int                    # P: answers start here
    response_mask: torch.Tensor   # (B, N)
    old_logp: torch.Tensor        # (B, N) behaviour log-probs
    version: torch.Tensor         # (B, N) policy version of each token
    rewards: torch.Tensor         # (B,)
    advantages: torch.Tensor      # (B,)
    groups: list
    old_logp_from_update: bool = False  # on-policy, not rescored: the update's own log-probs become old_logp


class RolloutPool:
    """Groups in progress. ``generate`` writes at most ``budget`` tokens per unfinished answer."""

    def __init__(self, group_size: int, max_new_tokens: int, budget: int | None = None):
        if group_size < 2:
            raise ValueError(f"group_size must be >= 2 (GRPO compares answers within a group); got {group_size}")
        if budget is not None and budget < 1:
            raise ValueError(f"partial-rollout budget must be >= 1 token per step; got {budget}")
        self.group_size, self.max_new_tokens = group_size, max_new_tokens
        self.budget = budget or max_new_tokens
        self.groups: list[Group] = []

    def add(self, problems, encode) -> None:
        for prob in problems:
            ids = encode(prob.prompt)
            self.groups.append(Group(prob, [Answer(list(ids)) for _ in range(self.group_size)]))

    def generate(self, policy, version: int, temperature: float = 1.0, generator=None, rescore_from: int = 0) -> int:
        """Extend every unfinished answer by up to ``budget`` tokens under ``policy``; returns tokens written.
        ``rescore_from`` > 0: a policy that rescores its samples (bf16) leaves the first ``rescore_from`` unfinished
        answers, in group order, with the sampler's log-probs (their update scores them)."""
        todo = [a for g in self.groups for a in g.answers if not a.finished]
        if not todo:
            return 0
        room = [self.max_new_tokens - len(a.tokens) for a in todo]
        n_new = min(self.budget, max(room))
        kw = {"rescore_from": rescore_from} if rescore_from else {}
        samples = policy.sample([a.prompt_ids + a.tokens for a in todo], n_new, temperature, generator, **kw)
        written = 0
        for a, left, (toks, lps, done) in zip(todo, room, samples):
            toks, lps = toks[:left], lps[:left]
            a.tokens += toks
            a.logp += lps
            a.version += [version] * len(toks)
            a.finished = done or len(a.tokens) >= self.max_new_tokens
            written += len(toks)
        return written

    def pop_finished(self) -> list[Group]:
        done = [g for g in self.groups if g.finished]
        self.groups = [g for g in self.groups if not g.finished]
        return done


def make_batch(groups: list[Group], reward_fn, decode, pad_id: int, advantage: str = "grpo") -> Batch:
    """Score finished groups and lay them out as tensors (GRPO advantages per answer)."""
    answers = [a for g in groups for a in g.answers]
    rewards = torch.tensor([[reward_fn(g.problem, decode(a.tokens)) for a in g.answers] for g in groups],
                           dtype=torch.float32)
    adv = group_advantages(rewards, advantage).reshape(-1)
    P = max(len(a.prompt_ids) for a in answers)
    N = max(max(len(a.tokens) for a in answers), 1)
    # padded Python lists first, one tensor per field (per-answer tensor writes cost ~8x more)
    ids, attn, old_logp, version = [], [], [], []
    for a in answers:
        p, n = len(a.prompt_ids), len(a.tokens)
        ids.append([pad_id] * (P - p) + a.prompt_ids + a.tokens + [pad_id] * (N - n))
        attn.append([0] * (P - p) + [1] * (p + n) + [0] * (N - n))
        old_logp.append(a.logp + [0.0] * (N - n))
        version.append(a.version + [0] * (N - n))
    ids, attn = torch.tensor(ids, dtype=torch.long), torch.tensor(attn, dtype=torch.long)
    old_logp, version = torch.tensor(old_logp, dtype=torch.float32), torch.tensor(version, dtype=torch.long)
    return Batch(ids, attn, P, attn[:, P:].float(), old_logp, version, rewards.reshape(-1), adv, groups)


# ------------------------------------------------------------------ pending groups as plain values (checkpoints)

# Where Problem stood before it moved to toy_rl.rl.tasks: checkpoints written then name it so.
OLD_PROBLEM = "toy_rl.arithmetic.tasks.base.Problem"


def _problem_classes() -> dict:
    """The problem types a checkpoint may name: toy_rl's Problem (also by its old name) and its (already
    imported) subclasses."""
    found, todo = {OLD_PROBLEM: Problem}, [Problem]
    while todo:
        cls = todo.pop()
        found[f"{cls.__module__}.{cls.__qualname__}"] = cls
        todo += cls.__subclasses__()
    return found


def problem_to_plain(problem) -> dict:
    """A problem as ``{"class": ..., "fields": {...}}``; ValueError for a type a checkpoint cannot hold."""
    cls = type(problem)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if cls is SimpleNamespace:
        return {"class": "types.SimpleNamespace", "fields": dict(vars(problem))}
    if name not in _problem_classes():
        raise ValueError(f"cannot checkpoint a problem of type {name}: tasks must return "
                         "toy_rl.rl.tasks.Problem (or a dataclass subclass of it)")
    return {"class": name, "fields": {f.name: getattr(problem, f.name) for f in fields(problem)}}


def problem_from_plain(d: dict):
    """Inverse of :func:`problem_to_plain`; only Problem types are built, never a class a file names freely."""
    if d["class"] == "types.SimpleNamespace":
        return SimpleNamespace(**d["fields"])
    cls = _problem_classes().get(d["class"])
    if cls is None:
        raise ValueError(f"checkpoint holds a problem of unknown type {d['class']!r}")
    return cls(**d["fields"])


def group_to_plain(group: Group) -> dict:
    return {"problem": problem_to_plain(group.problem),
            "answers": [{"prompt_ids": list(a.prompt_ids), "tokens": list(a.tokens), "logp": list(a.logp),
                         "version": list(a.version), "finished": bool(a.finished)} for a in group.answers]}


def group_from_plain(d) -> Group:
    """Inverse of :func:`group_to_plain` (a Group itself, from a checkpoint written before they were plain,
    is returned as it is)."""
    if isinstance(d, Group):
        return d
    return Group(problem_from_plain(d["problem"]), [Answer(**a) for a in d["answers"]])


def legacy_classes() -> list:
    """The data classes checkpoints held before they were plain values (Group, Answer, problems): safe to
    allow when loading one (:func:`toy_rl.rl.run_folder.load_state` ``classes``), as building them runs no code."""
    return [Group, Answer, *_problem_classes().values(), (Problem, OLD_PROBLEM)]
