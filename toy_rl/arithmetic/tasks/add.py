"""Task "add": multi-digit addition and subtraction with a short answer.

    prompt  "47+28="   answer "75"
    prompt  "31-56="   answer "-25"

Operands have exactly ``digits`` digits (default 2: 10 .. 99), so the layout
is fixed and an answer has at most digits + 1 characters ("198", "-89").
Why 2 digits: the default model learns them to ~50% in about a minute on a
laptop CPU, while 3 digits (answers written most significant digit first, so
carries must be foreseen) stays near 10% after three minutes. ``digits=3`` is
there for a longer warm start.

Reward: 1.0 if the completion -- the text after its last '=' if it has one,
surrounding spaces ignored -- is one integer equal to the answer ("0579" counts);
0.0 otherwise (wrong, empty, malformed like "57 9" or "5+7").
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from .base import Problem, Task, final_answer, parse_int


@dataclass(frozen=True)
class AddTask(Task):
    name = "add"
    answer_format = "an integer, e.g. 579 or -333"
    digits: int = 2
    ops: str = "+-"

    def __post_init__(self):
        if self.digits < 1 or not self.ops or set(self.ops) - set("+-"):
            raise ValueError(f"add needs digits >= 1 and ops made of '+' and '-'; got {self.digits}, {self.ops!r}")

    @property
    def max_answer_chars(self) -> int:
        return self.digits + 1

    def generate(self, rng: random.Random) -> Problem:
        low, high = 10 ** (self.digits - 1), 10 ** self.digits - 1
        a, b, op = rng.randint(low, high), rng.randint(low, high), rng.choice(self.ops)
        return Problem(f"{a}{op}{b}=", str(a + b if op == "+" else a - b))

    def reward(self, problem: Problem, completion: str) -> float:
        value = parse_int(final_answer(completion))
        return float(value is not None and value == int(problem.answer))

    def supervised_target(self, problem: Problem) -> str:
        return problem.answer
