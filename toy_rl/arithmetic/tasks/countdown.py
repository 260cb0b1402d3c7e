"""Task "countdown": reach a target by combining the given numbers with + - * (each at most once).

    prompt  "make 24 from 3 5 8:"     answer "24" (the target)
    rewarded:  "3*8"   "8*3"   "3*8=24"
    rejected:  "(8-5)*8" (8 is given once)   "3*5+9" (9 is not given)   "3 x 8" (malformed)

The problem generator draws ``n_numbers`` numbers in 1 .. ``max_number`` and
builds the target from a random expression over *all* of them, keeping
targets in 1 .. ``max_target``; so a solution using every number exists, and
usually many others (other orders, other subsets): exploration matters.

Reward: 1.0 if the completion (the text before any '=', spaces ignored) is an
expression of integers, + - * and parentheses (see ``expression.py``) that
uses only the given numbers, each at most as often as it is given, and
evaluates to the target; 0.0 otherwise (malformed, wrong value, a number not
given or used twice).

``supervised_target`` is the first solution of a fixed search: all numbers in
prompt order first, then other orders, '+' before '-' before '*', chains
((a o b) o c) before other bracketings, printed with as few brackets as
possible (``solve``).
"""
from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from .base import Problem, Task, numbers_and_target
from .expression import evaluate

_PREC = {"+": 1, "-": 1, "*": 2}
_ATOM = 3


def _trees(seq: tuple[int, ...]):
    """Every expression over the numbers ``seq`` in this order: (value, text, precedence)."""
    if len(seq) == 1:
        yield seq[0], str(seq[0]), _ATOM
        return
    for k in range(len(seq) - 1, 0, -1):            # split last-first: left chains come first
        for lv, lt, lp in _trees(seq[:k]):
            for rv, rt, rp in _trees(seq[k:]):
                for op in "+-*":
                    p = _PREC[op]
                    left = f"({lt})" if lp < p else lt
                    right = f"({rt})" if rp < p or (op == "-" and rp == p) else rt
                    value = lv + rv if op == "+" else lv - rv if op == "-" else lv * rv
                    yield value, f"{left}{op}{right}", p


@lru_cache(maxsize=100_000)
def solve(numbers: tuple[int, ...], target: int) -> str | None:
    """One expression reaching ``target`` (all numbers first, then fewer); None if there is none."""
    for size in range(len(numbers), 0, -1):
        for order in itertools.permutations(range(len(numbers)), size):
            for value, text, _ in _trees(tuple(numbers[i] for i in order)):
                if value == target:
                    return text
    return None


def parse_prompt(prompt: str) -> tuple[tuple[int, ...], int]:
    """'make 24 from 3 5 8:' -> ((3, 5, 8), 24)."""
    return numbers_and_target(prompt, "make")


@dataclass(frozen=True)
class CountdownTask(Task):
    name = "countdown"
    answer_format = "an expression over the given numbers with + - * ( ), e.g. (3+5)*8"
    n_numbers: int = 3
    max_number: int = 9
    max_target: int = 50

    def __post_init__(self):
        if not (2 <= self.n_numbers <= 5 and self.max_number >= 2 and self.max_target >= 1):
            raise ValueError("countdown needs 2 <= n_numbers <= 5, max_number >= 2, max_target >= 1")

    @property
    def max_answer_chars(self) -> int:
        digits = len(str(self.max_number))          # numbers, operators and up to n-1 bracket pairs
        return self.n_numbers * digits + 3 * (self.n_numbers - 1)

    def generate(self, rng: random.Random) -> Problem:
        while True:
            numbers = tuple(rng.randint(1, self.max_number) for _ in range(self.n_numbers))
            shuffled = rng.sample(numbers, len(numbers))
            trees = list(_trees(tuple(shuffled)))
            target = rng.choice(trees)[0]
            if 1 <= target <= self.max_target:
                return Problem(f"make {target} from {' '.join(map(str, numbers))}:", str(target))

    def reward(self, problem: Problem, completion: str) -> float:
        numbers, target = parse_prompt(problem.prompt)
        try:
            value, used = evaluate(completion.split("=", 1)[0])
        except ValueError:
            return 0.0
        return float(value == target and not Counter(used) - Counter(numbers))

    def supervised_target(self, problem: Problem) -> str:
        numbers, target = parse_prompt(problem.prompt)
        solution = solve(numbers, target)
        if solution is None:
            raise ValueError(f"no solution for {problem.prompt!r}")
        return solution
