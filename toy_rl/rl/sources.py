"""Where each update's data comes from: on-policy, stale by reuse, stale by lag, or partial rollout.

docs/protocol.md, section 4 (the kinds of staleness):

* ``reuse`` with staleness K: one rollout of (K+1)·P prompts is split into K+1
  mini-batches of P prompts, used by K+1 successive updates (PPO-style; the
  authors' script: 256 prompts, mini-batch 64). The k-th mini-batch was sampled
  k updates ago. Every update sees the same number of fresh-looking samples;
  only their age differs. K = 0 is on-policy.
* ``epochs`` with staleness K: one rollout of P prompts serves K+1 successive
  updates (PPO epochs over the same batch, the paper's "reusing experience";
  rung 1's ``reuse``): the j-th update on it sees data j updates old.
* ``lag`` with staleness k: every update gets a fresh batch, sampled by the
  policy as it was k updates ago (asynchronous generation).
* ``partial`` with a budget of T tokens: a pool of P prompts; each step writes
  at most T more tokens of every unfinished answer, and trains on the groups
  that finished. The rest resume next step under the newer policy.
"""
from __future__ import annotations

import copy
import random

import torch

from .rollout import RolloutPool, group_from_plain, group_to_plain, make_batch

MODES = ("reuse", "epochs", "lag")


class BatchSource:
    """Hands out one :class:`~toy_rl.rl.rollout.Batch` per update (or None if no group finished)."""

    update_scores_on_policy = True      # False: a rescoring policy rescores every answer it samples (bench/)

    def __init__(self, policy, task, prompts: int, group_size: int, max_new_tokens: int, staleness: int = 0,
                 mode: str = "reuse", budget: int | None = None, temperature: float = 1.0,
                 advantage: str = "grpo", seed: int = 0):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
        if not isinstance(staleness, int) or staleness < 0:
            raise ValueError(f"staleness must be an integer >= 0; got {staleness!r}")
        if budget is not None and staleness > 0:
            raise ValueError("partial rollout (budget) is its own source of staleness here; use staleness=0 with it")
        if prompts < 1:
            raise ValueError(f"prompts per update must be >= 1; got {prompts}")
        self.policy, self.task = policy, task
        self.prompts, self.staleness, self.mode, self.budget = prompts, staleness, mode, budget
        self.temperature, self.advantage = temperature, advantage
        self.pool = RolloutPool(group_size, max_new_tokens, budget)
        self.rng = random.Random(seed)
        self.generator = torch.Generator(device=policy.device).manual_seed(seed)
        self.queue = []             # reuse: mini-batches not yet used
        self.snapshots = {}         # lag: version -> trainable weights

    def next(self, version: int):
        if self.budget is not None:
            return self._partial(version)
        if self.mode == "lag":
            return self._lagged(version)
        if self.mode == "epochs":
            return self._epochs(version)
        return self._reused(version)

    def _batch(self, groups):
        p = self.policy
        return make_batch(groups, self.task.reward, p.decode, p.pad_id, self.advantage)

    def _rollout(self, n_prompts: int, version: int, rescore_from: int = 0):
        self.pool.add(self.task.sample(n_prompts, self.rng), self.policy.encode)
        while self.pool.generate(self.policy, version, self.temperature, self.generator, rescore_from):
            pass
        return self.pool.pop_finished()

    def _reused(self, version: int):
        if not self.queue:
            first = self._scored_by_update()
            groups = self._rollout(self.prompts * (self.staleness + 1), version, first)
            self.queue = [groups[i:i + self.prompts] for i in range(0, len(groups), self.prompts)]
            return self._batch(self.queue.pop(0))._replace(old_logp_from_update=first > 0)
        return self._batch(self.queue.pop(0))

    def _scored_by_update(self) -> int:
        """How many answers of a fresh rollout the update scores for its old log-probs: the first mini-batch's, which
        trains at once (on-policy), when the policy would otherwise score its samples a second time to get them
        (bf16: :meth:`toy_rl.lm.policy.HFPolicy.sample`'s ``rescore``); else 0. The update's first scoring pass gives
        the same numbers (the same forward, the same weights), so this saves a forward over a third of a reuse-2
        rollout and over every batch on-policy."""
        p = self.policy
        if not (self.update_scores_on_policy and getattr(p, "rescore", False) and self.temperature > 0
                and getattr(p, "sample_takes_rescore_from", False)):
            return 0
        return self.prompts * self.pool.group_size

    def _epochs(self, version: int):
        if not self.queue:
            groups = self._rollout(self.prompts, version)
            self.queue = [groups] * (self.staleness + 1)
        return self._batch(self.queue.pop(0))

    def _lagged(self, version: int):
        self.snapshots[version] = copy.deepcopy(self.policy.get_weights())
        behind = max(0, version - self.staleness)
        for v in [v for v in self.snapshots if v < behind]:
            del self.snapshots[v]
        current = self.snapshots[version]
        self.policy.set_weights(self.snapshots[behind])
        try:
            groups = self._rollout(self.prompts, behind)
        finally:
            self.policy.set_weights(current)
        return self._batch(groups)

    def _partial(self, version: int):
        missing = self.prompts - len(self.pool.groups)
        self.pool.add(self.task.sample(missing, self.rng), self.policy.encode)
        self.pool.generate(self.policy, version, self.temperature, self.generator)
        done = self.pool.pop_finished()
        return self._batch(done) if done else None

    def state_dict(self) -> dict:
        """Everything needed to continue identically, as tensors and plain values only (a checkpoint is
        read with ``weights_only=True``): random states, pending rollouts, lag snapshots."""
        return {"rng": self.rng.getstate(), "generator": self.generator.get_state(),
                "queue": [[group_to_plain(g) for g in batch] for batch in self.queue],
                "snapshots": self.snapshots, "pool": [group_to_plain(g) for g in self.pool.groups]}

    def load_state_dict(self, state: dict) -> None:
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.generator.set_state(state["generator"])
        self.queue = [[group_from_plain(g) for g in batch] for batch in state["queue"]]
        self.snapshots = dict(state["snapshots"])
        self.pool.groups = [group_from_plain(g) for g in state["pool"]]
