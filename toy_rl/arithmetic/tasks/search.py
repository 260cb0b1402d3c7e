"""Task "search": find two of the given numbers that sum to the target, trying pairs until one does.

    prompt  "sum 11 from 7 4 9 3 5 8 2 6:"
    target  "8+2=10 4+2=6 3+2=5 7+4=11"   (wrong tries, then the first pair that sums to 11)
    rewarded:  "3+8=11"   "9+2=11"   "7+9=16 3+8=11"
    rejected:  "3+8=12" (sum written wrong)   "3+8=1" (cut off)   "1+10=11" (not given)
               "7+9=16 4+5=9" (stopped on a miss)

Why this task exists: it makes *failed answers longer than right ones*, as in
the paper's long reasoning traces, where failures run to the length limit and
negative tokens dominate the loss (``docs/protocol.md`` §1). Checking a try is
easy (add two digits, compare with the target in the prompt); choosing the
right pair is the hard part. A model that cannot find the pair keeps trying
until the generation budget runs out, so wrong answers run on while right ones
stop at the hit. Not every failure runs on: a model that adds wrongly may
"hit" early and stop. Measured after the 600-step warm start (presets.py),
temperature 1.0, a budget of 40 tokens: right answers 12.6 tokens, wrong ones
22.4, λ ≈ 1.8 (for "add" and "scratchpad" λ ≈ 1.0).

The supervised target (what the warm start imitates) is a trace of tries: a
geometric number of wrong pairs (each try is the hit with probability
``p_first``, at most ``max_wrong`` misses), then the first solution pair in
the problem's order. The trace is seeded by the prompt, so it is the same
every time it is asked for.

Reward: 1.0 if the completion's last try (tries are separated by spaces)
reads ``a+b=s`` with a and b among the given numbers (each used at most as
often as it is given), a + b equal to the target and s written as the target;
0.0 otherwise. Earlier tries are not checked.
"""
from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass

from .base import Problem, Task, numbers_and_target

_TRY = re.compile(r"(\d+)\+(\d+)=(\d+)")


def parse_prompt(prompt: str) -> tuple[tuple[int, ...], int]:
    """'sum 11 from 7 4 9:' -> ((7, 4, 9), 11)."""
    return numbers_and_target(prompt, "sum")


@dataclass(frozen=True)
class SearchTask(Task):
    name = "search"
    answer_format = "tries 'a+b=sum' separated by spaces, the last one reaching the target, e.g. 7+9=16 3+8=11"
    n_numbers: int = 8
    max_number: int = 9
    p_first: float = 0.5       # chance that a try in the supervised trace is the hit
    max_wrong: int = 6         # most misses before the hit in the supervised trace

    def __post_init__(self):
        if not (3 <= self.n_numbers <= 12 and 2 <= self.max_number <= 99):
            raise ValueError(f"search needs 3 <= n_numbers <= 12 and 2 <= max_number <= 99; "
                             f"got {self.n_numbers}, {self.max_number}")
        if not 0 < self.p_first <= 1:
            raise ValueError(f"p_first must lie in (0, 1]; got {self.p_first}")
        if self.max_wrong < 0:
            raise ValueError(f"max_wrong must be >= 0; got {self.max_wrong}")

    @property
    def max_answer_chars(self) -> int:
        """Longest supervised trace: max_wrong misses and the hit, each 'a+b=s', one space between."""
        pairs = self.n_numbers * (self.n_numbers - 1) // 2
        tries = min(self.max_wrong, pairs - 1) + 1
        width = 2 * len(str(self.max_number)) + 2 + len(str(2 * self.max_number))
        return tries * width + tries - 1

    def generate(self, rng: random.Random) -> Problem:
        numbers = [rng.randint(1, self.max_number) for _ in range(self.n_numbers)]
        i, j = rng.sample(range(self.n_numbers), 2)
        target = numbers[i] + numbers[j]
        return Problem(f"sum {target} from {' '.join(map(str, numbers))}:", str(target))

    def reward(self, problem: Problem, completion: str) -> float:
        numbers, target = parse_prompt(problem.prompt)
        tries = completion.split()
        hit = _TRY.fullmatch(tries[-1]) if tries else None
        if hit is None:
            return 0.0
        a, b, written = map(int, hit.groups())
        return float(a + b == target and written == target and not Counter([a, b]) - Counter(numbers))

    def supervised_target(self, problem: Problem) -> str:
        numbers, target = parse_prompt(problem.prompt)
        rng = random.Random(problem.prompt)
        pairs = [(numbers[i], numbers[j]) for i in range(len(numbers)) for j in range(i + 1, len(numbers))]
        hits = [p for p in pairs if sum(p) == target]
        misses = [p for p in pairs if sum(p) != target]
        n_miss = 0
        while n_miss < min(self.max_wrong, len(misses)) and rng.random() >= self.p_first:
            n_miss += 1
        tries = rng.sample(misses, n_miss) + [hits[0]]
        return " ".join(f"{a}+{b}={a + b}" for a, b in tries)
