"""Task "scratchpad": addition of two ``digits``-digit numbers, worked column by column.

    prompt  "4567+891:"
    target  "7+1+0=8 6+9+0=15 5+8+1=14 4+0+1=5 =5458"

Each step adds one column, right to left: digit + digit + carry-in = column sum
(the carry-out is the sum's tens digit); a final " =" gives the result. A
default answer is ~40 tokens, long enough that partial rollout (stopping
mid-answer, resuming with a newer policy) matters.

Failed answers are *not* longer than right ones: a warm-started model that
gets the sum wrong still writes one step per column and stops. Measured on
3-digit problems, warm starts of 200-800 steps (sampled accuracy 0.4-83 %),
temperature 0.6 and 1.0, budgets of 1-3x the longest answer: wrong answers
30.6-31.5 tokens, right ones 31.0-31.8, λ (docs/protocol.md §1) 0.98-1.01.
For failures that run on, see the task "search" (search.py).

Reward: only the final result counts: 1.0 if the text after the completion's
last '=' is one integer equal to the sum, else 0.0. The steps are not checked.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .base import Problem, Task, final_answer, parse_int


def worked_sum(a: int, b: int) -> str:
    """4567, 891 -> '7+1+0=8 6+9+0=15 5+8+1=14 4+0+1=5 =5458'."""
    width = max(len(str(a)), len(str(b)))
    da, db = str(a).zfill(width)[::-1], str(b).zfill(width)[::-1]
    steps, carry = [], 0
    for x, y in zip(da, db):
        s = int(x) + int(y) + carry
        steps.append(f"{x}+{y}+{carry}={s}")
        carry = s // 10
    return " ".join(steps) + f" ={a + b}"


@dataclass(frozen=True)
class ScratchpadTask(Task):
    name = "scratchpad"
    answer_format = "column steps 'x+y+carry=sum' separated by spaces, then ' =RESULT'"
    digits: int = 4

    def __post_init__(self):
        if not 1 <= self.digits <= 9:
            raise ValueError(f"scratchpad needs 1 <= digits <= 9; got {self.digits}")

    @property
    def max_answer_chars(self) -> int:
        return len(worked_sum(10 ** self.digits - 1, 10 ** self.digits - 1))

    def generate(self, rng: random.Random) -> Problem:
        low, high = 10 ** (self.digits - 1), 10 ** self.digits - 1
        a, b = rng.randint(low, high), rng.randint(low, high)
        return Problem(f"{a}+{b}:", str(a + b))

    def reward(self, problem: Problem, completion: str) -> float:
        value = parse_int(final_answer(completion))
        return float(value is not None and value == int(problem.answer))

    def supervised_target(self, problem: Problem) -> str:
        a, b = problem.prompt.rstrip(":").split("+")
        return worked_sum(int(a), int(b))
