"""What every task provides, whatever the rung: problems generated in code, a verifiable reward, a fixed held-out
set. Rung 2's tasks (:mod:`toy_rl.arithmetic.tasks`) and rungs 3-4's (:mod:`toy_rl.lm.tasks`) subclass :class:`Task`;
the shared loop (:mod:`toy_rl.rl`) sees only this interface and :class:`Problem`, which its checkpoints store.

A task is a small frozen dataclass (its fields are its settings, e.g. the
number of digits). Subclasses write four things: ``name``, ``generate(rng)``
(one random problem), ``reward(problem, completion)`` and
``supervised_target(problem)`` (the text the warm start teaches), plus
``max_answer_chars``. This base class turns ``generate`` into:

* ``heldout(n)``: the first n problems of a fixed pool drawn with seed
  ``HELDOUT_SEED`` -- the same list on every machine and every call;
* ``sample(n, rng)``: fresh training problems, never one whose prompt is in
  that held-out pool (so evaluation stays clean).
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import ClassVar

HELDOUT_SEED = 20251021          # fixed: the held-out set is part of the task's definition
HELDOUT_POOL = 1000              # largest held-out set a task offers


@dataclass(frozen=True)
class Problem:
    prompt: str                  # what the model reads (after BOS)
    answer: str                  # the reference final answer (for countdown: the target value)


def as_rng(rng) -> random.Random:
    """Accept a random.Random, an int seed, or None (fresh, unseeded)."""
    if isinstance(rng, random.Random):
        return rng
    if rng is None or isinstance(rng, int):
        return random.Random(rng)
    raise ValueError(f"rng must be a random.Random, an int seed or None; got {type(rng).__name__}")


@dataclass(frozen=True)
class Task:
    name: ClassVar[str] = "task"
    answer_format: ClassVar[str] = ""         # one line for humans: what a completion must look like

    # --- what a subclass writes ---------------------------------------------------------------
    def generate(self, rng: random.Random) -> Problem:
        raise NotImplementedError

    def reward(self, problem: Problem, completion: str) -> float:
        raise NotImplementedError

    def supervised_target(self, problem: Problem) -> str:
        raise NotImplementedError

    @property
    def max_answer_chars(self) -> int:
        """Longest supervised target in characters (EOS not counted): a generation budget."""
        raise NotImplementedError

    # --- shared --------------------------------------------------------------------------------
    def params(self) -> dict:
        """The task's settings, e.g. {'digits': 3, 'ops': '+-'} (used in cache keys)."""
        return asdict(self)

    @cached_property
    def _heldout_pool(self) -> list[Problem]:
        rng, seen, pool = random.Random(HELDOUT_SEED), set(), []
        for _ in range(100 * HELDOUT_POOL):
            p = self.generate(rng)
            if p.prompt not in seen:
                seen.add(p.prompt)
                pool.append(p)
                if len(pool) == HELDOUT_POOL:
                    break
        return pool

    @cached_property
    def _heldout_prompts(self) -> frozenset[str]:
        return frozenset(p.prompt for p in self._heldout_pool)

    def heldout(self, n: int = 200) -> list[Problem]:
        """The first ``n`` problems of the fixed held-out pool (distinct prompts, deterministic)."""
        pool = self._heldout_pool
        if not 1 <= n <= len(pool):
            raise ValueError(f"held-out size must be in 1 .. {len(pool)} for task {self.name!r}; got {n}")
        return pool[:n]

    def sample(self, n: int, rng=None) -> list[Problem]:
        """``n`` training problems drawn with ``rng`` (random.Random or int seed), none from the held-out pool."""
        rng, banned, out = as_rng(rng), self._heldout_prompts, []
        for _ in range(100 * n + 10_000):
            if len(out) == n:
                return out
            p = self.generate(rng)
            if p.prompt not in banned:
                out.append(p)
        if len(out) == n:
            return out
        raise ValueError(f"task {self.name!r} with {self.params()} has too few problems outside its held-out "
                         f"set of {len(banned)}; make it larger (e.g. more digits)")
