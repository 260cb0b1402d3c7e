"""Tasks for a pretrained LM (rungs 3 and 4), with the same interface as rung 2's tasks.

* :class:`ArithmeticTask`: problems generated in code (default: 2-digit
  addition), asked with a plain few-shot prompt (or as a chat question).
* :class:`SearchTask`: find two numbers that sum to a target, trying pairs aloud: failed answers run on
  until the budget, right ones stop at the hit (the long-failure setting, docs/protocol.md §1).
* :class:`GSM8KTask`: question/answer pairs from a local JSONL file in GSM8K's
  format, for users who bring their own data (nothing is downloaded).

Both give ``sample(n, rng)``, ``heldout(n)`` (fixed, disjoint from training),
``reward(problem, completion)`` in [0, 1] and ``max_answer_chars``. Each also
says which ``prompt_format`` the policy must use (:class:`toy_rl.lm.policy.HFPolicy`):
``"plain"`` -- ``Problem.prompt`` is the whole text the model reads -- or
``"chat"`` -- ``Problem.prompt`` is the user's message and the policy wraps it in
the tokenizer's chat template.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import ClassVar, NamedTuple

from ..rl.tasks import HELDOUT_POOL, HELDOUT_SEED, Problem, Task, as_rng
from .prompts import IM_END, extract_final_number, extract_int, few_shot_prompt

FORMATS = ("plain", "chat")
OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
SHOTS_SEED = 1234                  # fixed: the worked examples are part of the task's definition


@dataclass(frozen=True)
class ArithmeticTask(Task):
    """``a op b`` with ``digits``-digit a and ``digits2``-digit b (default: same as a).

    Plain format (default), with ``shots`` fixed worked examples::

        12 + 45 = 57
        ...
        47 + 38 =

    The model should continue with `` 85`` and a newline. Reward: 1.0 when the first
    integer of the completion's first line is the right result, else 0.0. For "-",
    a >= b (results are never negative). Worked examples never appear as questions.

    ``cot=True`` (chat format only) asks for reasoning first: "What is 47 + 38? Think step by step,
    then write the final answer as '#### <number>'." The reply runs until end-of-turn or
    ``cot_tokens``; reward 1.0 when its final number (after the last ``####``, else the last number)
    is the result. It was built to let failures run on (λ > 1, docs/protocol.md §1), and on the untouched
    model they do: on 40 held-out problems, budget 128 tokens, greedy 22.5 % right (right answers 36.6
    tokens, wrong 54.1); sampled at temperature 0.6 (the paper's, §5.1) 10 % right (39.2 vs 86.0 tokens);
    at 1.0 only 2.5 %, so the task asks for 0.6 (:attr:`temperature`). But in training batches the right
    answers ramble too: the rung-3 pilot (``toy-rl pilot --rung 3 --task add-cot``: symmetric + BAPO,
    staleness 2 by disjoint mini-batches, 8 updates, seed 0; 41 min on this shared 2-core CPU) measured
    right answers of 68-72 tokens and wrong ones of 81 on average, λ median 0.99, ρ before BAPO's search
    median 0.50 (below ρ0 in 1 of 8 updates): **balanced**, so it is not yet rung 3's negatives-dominate
    setting. Held-out greedy accuracy went 0.19 → 0.29 (symmetric) and 0.17 (BAPO) in those 8 updates.
    """
    name: ClassVar[str] = "lm-arithmetic"
    answer_format: ClassVar[str] = "the result as digits, then a newline (e.g. ' 85')"
    digits: int = 2
    op: str = "+"
    digits2: int | None = None
    shots: int = 3
    prompt_format: str = "plain"
    cot: bool = False
    cot_tokens: int = 128

    COT_INSTRUCTION: ClassVar[str] = "Think step by step, then write the final answer as '#### <number>'."
    COT_TEMPERATURE: ClassVar[float] = 0.6

    def __post_init__(self):
        if self.cot and self.prompt_format != "chat":
            raise ValueError("cot=True asks for reasoning in a chat reply: it needs prompt_format='chat'")
        if isinstance(self.cot_tokens, bool) or not isinstance(self.cot_tokens, int) or self.cot_tokens < 16:
            raise ValueError(f"cot_tokens must be an integer >= 16; got {self.cot_tokens!r}")
        for field_name in ("digits", "digits2"):
            d = getattr(self, field_name)
            if d is not None and (isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 6):
                raise ValueError(f"{field_name} must be an integer in 1..6; got {d!r}")
        if self.op not in OPS:
            raise ValueError(f"op must be one of {sorted(OPS)}; got {self.op!r}")
        if isinstance(self.shots, bool) or not isinstance(self.shots, int) or not 0 <= self.shots <= 20:
            raise ValueError(f"shots (worked examples in the prompt) must be an integer in 0..20; got {self.shots!r}")
        if self.prompt_format not in FORMATS:
            raise ValueError(f"prompt_format must be one of {FORMATS}; got {self.prompt_format!r}")

    @property
    def _d2(self) -> int:
        return self.digits if self.digits2 is None else self.digits2

    @property
    def max_answer_chars(self) -> int:
        if self.op == "*":
            return self.digits + self._d2
        return max(self.digits, self._d2) + (self.op == "+")

    @property
    def max_new_tokens(self) -> int:
        """Enough for the space, every digit (one token each in SmolLM2) and the stop token; with ``cot``,
        ``cot_tokens``."""
        return self.cot_tokens if self.cot else self.max_answer_chars + 2

    @property
    def temperature(self) -> float | None:
        """The sampling temperature this task is run at, if it sets one (``cot``: 0.6), else None."""
        return self.COT_TEMPERATURE if self.cot else None

    def _draw(self, rng: random.Random) -> tuple[int, int]:
        a = rng.randint(10 ** (self.digits - 1) if self.digits > 1 else 0, 10 ** self.digits - 1)
        b = rng.randint(10 ** (self._d2 - 1) if self._d2 > 1 else 0, 10 ** self._d2 - 1)
        return (max(a, b), min(a, b)) if self.op == "-" else (a, b)

    def _question(self, a: int, b: int) -> str:
        return f"{a} {self.op} {b} ="

    @property
    def n_problems(self) -> int:
        """How many distinct questions the settings allow."""
        span = lambda d: 10 ** d - (10 ** (d - 1) if d > 1 else 0)
        n = span(self.digits) * span(self._d2)
        return (n + span(self.digits)) // 2 if self.op == "-" and self.digits == self._d2 else n

    @cached_property
    def _heldout_pool(self) -> list[Problem]:
        """As the base class, but at most a quarter of all questions (2-digit x 1-digit has only
        900), so training always has problems left to draw."""
        rng, seen, pool = random.Random(HELDOUT_SEED), set(), []
        size = min(HELDOUT_POOL, max(1, (self.n_problems - self.shots) // 4))
        while len(pool) < size:
            p = self.generate(rng)
            if p.prompt not in seen:
                seen.add(p.prompt)
                pool.append(p)
        return pool

    @cached_property
    def examples(self) -> tuple[tuple[str, int], ...]:
        """The fixed worked examples: ((question, answer), ...)."""
        rng, out = random.Random(SHOTS_SEED), []
        while len(out) < self.shots:
            a, b = self._draw(rng)
            q = self._question(a, b)
            if q not in (e[0] for e in out):
                out.append((q, OPS[self.op](a, b)))
        return tuple(out)

    def generate(self, rng: random.Random) -> Problem:
        shot_questions = {q for q, _ in self.examples}
        while True:
            a, b = self._draw(rng)
            q = self._question(a, b)
            if q not in shot_questions:
                break
        answer = str(OPS[self.op](a, b))
        if self.cot:
            return Problem(f"What is {a} {self.op} {b}? {self.COT_INSTRUCTION}", answer)
        if self.prompt_format == "chat":
            return Problem(f"What is {a} {self.op} {b}? Reply with the number only.", answer)
        return Problem(few_shot_prompt(self.examples, q), answer)

    def reward(self, problem: Problem, completion: str) -> float:
        if self.cot:
            return float(_same_number(extract_final_number(completion.split(IM_END, 1)[0]), problem.answer))
        got = extract_int(completion)
        return float(got is not None and str(got) == problem.answer)

    def supervised_target(self, problem: Problem) -> str:
        return f" {problem.answer}"


# --------------------------------------------------------------------------------------- search (long failures)

@dataclass(frozen=True)
class SearchTask(Task):
    """Rung 3's task where failed answers run on: find two of the given numbers that sum to the target,
    trying pairs aloud until one does (rung 2's task "search", :mod:`toy_rl.arithmetic.tasks.search`, asked of
    a pretrained LM with ``shots`` worked examples, one per line)::

        sum 11 from 7 4 9 3 5 8: 7+9=16 4+3=7 3+8=11
        ...
        sum 13 from 6 2 9 4 8 5:

    A right answer stops at the hit and the newline; a model that cannot find the pair keeps trying until
    ``max_new_tokens`` runs out, so wrong answers are longer than right ones and negative tokens dominate a
    token-mean loss (λ > 1; docs/protocol.md §1), as in the paper's long reasoning traces. Reward: rung 2's
    (the last try on the first line reads ``a+b=s`` with a and b among the given numbers and a + b = s = the
    target). ``max_number`` sets how hard the sums are.

    The untouched model is too weak for RL here: no setting measured gives SmolLM2-135M-Instruct the right
    answers a GRPO group needs (greedy, 48 held-out problems, budget 96 tokens, this 2-core CPU): 3 shots, 6
    numbers up to 9: 0 % right, wrong answers 11.5 tokens (it stops after a miss; 0 % and 12.3 tokens sampled
    at temperature 1); 3 shots, numbers up to 30: 2.1 %, right answers 10 tokens, wrong 33.7 (a length ratio of
    3.4: the long failures are there); 8 shots, 4 numbers up to 9: 0 %, wrong answers 61 tokens (it finds the
    pair, then keeps trying, and an answer that does not end at its hit scores 0).

    ``warm_start`` > 0 first fine-tunes the LoRA adapters for that many steps on worked answers
    (:mod:`toy_rl.lm.warmstart`, cached; every run of the task starts from them), as rung 2 warm-starts its
    GPT. The task "search-warm" (50 steps) is rung 3's negatives-dominate setting: after the warm start the
    model keeps trying pairs until it finds the hit or the budget ends, so failures run on. Its pilot
    (``toy-rl pilot --rung 3 --task search-warm``, see the README) measured training batches with about 60 %
    right answers of ~24 tokens against wrong ones of 74-87 (λ_A ≈ 3, ρ before BAPO's search ≈ 0.24), above
    the 10-30 % base accuracy the protocol asks for. Fewer warm-start steps lower the accuracy, but in a trial
    at 20 steps the model had not yet learned to keep trying: it stopped after a few misses, right and wrong
    answers were equally long, λ ≈ 1. Harder sums do it: "search-hard-warm" (numbers up to 30, the same 50-step
    warm start on its own worked answers) sampled 22.7 % right answers at temperature 1 (16 prompts × 8, budget
    96), right answers 29 tokens against 63 for wrong ones, λ_A 1.85, ρ at the start bounds 0.35 (below ρ0),
    11 of 16 groups mixed (``python -m toy_rl.lm.length_probe --task search-hard-warm --budgets 64 96``; at
    budget 64: λ_A 1.46, ρ 0.41). ``python -m toy_rl.lm.length_probe --task search-warm`` reads λ and the
    accuracy of a sampled batch before any RL.
    """
    name: ClassVar[str] = "lm-search"
    answer_format: ClassVar[str] = "tries 'a+b=sum' separated by spaces, the last reaching the target, then a newline"
    n_numbers: int = 6
    max_number: int = 9
    shots: int = 3
    max_new_tokens: int = 96
    prompt_format: str = "plain"
    warm_start: int = 0

    def __post_init__(self):
        if self.prompt_format != "plain":
            raise ValueError(f"the search task is asked with a plain few-shot prompt; got prompt_format="
                             f"{self.prompt_format!r}")
        if isinstance(self.shots, bool) or not isinstance(self.shots, int) or not 1 <= self.shots <= 20:
            raise ValueError(f"shots (worked examples in the prompt) must be an integer in 1..20; got {self.shots!r}")
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 8:
            raise ValueError(f"max_new_tokens must be an integer >= 8; got {self.max_new_tokens!r}")
        if isinstance(self.warm_start, bool) or not isinstance(self.warm_start, int) or self.warm_start < 0:
            raise ValueError(f"warm_start (LoRA warm-start steps before RL) must be an integer >= 0; "
                             f"got {self.warm_start!r}")
        self._inner                                   # n_numbers and max_number checked by rung 2's task

    @cached_property
    def _inner(self):
        from ..arithmetic.tasks.search import SearchTask as Rung2Search
        return Rung2Search(n_numbers=self.n_numbers, max_number=self.max_number)

    @property
    def max_answer_chars(self) -> int:
        return self._inner.max_answer_chars

    @cached_property
    def examples(self) -> tuple[tuple[str, str], ...]:
        """The fixed worked examples: ((question, trace), ...), traces as rung 2's supervised target."""
        rng, out = random.Random(SHOTS_SEED), []
        while len(out) < self.shots:
            p = self._inner.generate(rng)
            if p.prompt not in (q for q, _ in out):
                out.append((p.prompt, self._inner.supervised_target(p)))
        return tuple(out)

    def generate(self, rng: random.Random) -> Problem:
        shots = {q for q, _ in self.examples}
        while True:
            p = self._inner.generate(rng)
            if p.prompt not in shots:
                return Problem(few_shot_prompt(self.examples, p.prompt), p.answer)

    def reward(self, problem: Problem, completion: str) -> float:
        question = problem.prompt.rsplit("\n", 1)[-1]
        first_line = completion.split("\n", 1)[0].split(IM_END, 1)[0]
        return self._inner.reward(Problem(question, problem.answer), first_line)

    def supervised_target(self, problem: Problem) -> str:
        return " " + self._inner.supervised_target(Problem(problem.prompt.rsplit("\n", 1)[-1], problem.answer))


# --------------------------------------------------------------------------------------- GSM8K JSONL

class QA(NamedTuple):
    """One GSM8K record: the question, the worked solution, and its final answer (text)."""
    question: str
    solution: str
    answer: str


def _final_answer_line(solution: str) -> str | None:
    """The number on the last ``#### N`` line of a GSM8K solution, normalised (``1,200`` -> ``1200``)."""
    if "####" not in solution:
        return None
    value = extract_final_number(solution)
    return None if value is None else str(value)


def load_gsm8k_jsonl(path) -> list[QA]:
    """Read a local JSONL file in GSM8K's format: one JSON object per line with string fields
    ``"question"`` and ``"answer"``, the answer ending with a line ``#### N``. Blank lines are skipped.

    FileNotFoundError for a missing file; ValueError (naming the file and line) for a line that is
    not a JSON object, lacks a field, or whose answer has no ``#### N``; ValueError for no records.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise FileNotFoundError(f"no JSONL file at {p} (toy_rl never downloads data: pass the path of a "
                                "local file with one {'question': ..., 'answer': '... #### N'} per line)")
    out = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not valid JSON ({err.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected a JSON object with 'question' and 'answer'; "
                                 f"got {type(rec).__name__}")
            missing = [k for k in ("question", "answer") if not isinstance(rec.get(k), str)]
            if missing:
                raise ValueError(f"{where}: missing or non-string field(s) {missing}")
            final = _final_answer_line(rec["answer"])
            if final is None:
                raise ValueError(f"{where}: the answer has no final line '#### <number>' (GSM8K format)")
            out.append(QA(rec["question"].strip(), rec["answer"], final))
    if not out:
        raise ValueError(f"{p} holds no records")
    return out


def _same_number(a, b: str) -> bool:
    try:
        return a is not None and float(a) == float(b)
    except ValueError:
        return False


@dataclass(frozen=True)
class GSM8KTask(Task):
    """Word problems from a local GSM8K-format JSONL file (see :func:`load_gsm8k_jsonl`).

    Held-out set: ``heldout_path`` if given, else the first ``heldout_size`` records of
    the file after a fixed shuffle; training draws (with replacement) from the rest,
    never a question that is also held out.

    ``prompt_format="chat"`` (default, for instruct models): the user's message is the
    question and an instruction to end with ``#### <number>``; the reply may reason over
    several lines (the policy stops at end-of-text). ``"plain"``: ``shots`` solved
    examples as ``Question: ...`` / ``Answer: N`` lines, the model answers with the
    number directly and stops at the newline. Reward: 1.0 when the final number (after
    the last ``####``, else the last number) equals the reference.
    """
    name: ClassVar[str] = "gsm8k-jsonl"
    answer_format: ClassVar[str] = "reasoning, then a final line '#### <number>'"
    INSTRUCTION: ClassVar[str] = "Solve the problem step by step. End with a final line '#### <number>'."
    path: str
    heldout_path: str | None = None
    heldout_size: int = 200
    shots: int = 0
    prompt_format: str = "chat"

    def __post_init__(self):
        if self.prompt_format not in FORMATS:
            raise ValueError(f"prompt_format must be one of {FORMATS}; got {self.prompt_format!r}")
        if isinstance(self.shots, bool) or not isinstance(self.shots, int) or self.shots < 0:
            raise ValueError(f"shots must be an integer >= 0; got {self.shots!r}")
        if isinstance(self.heldout_size, bool) or not isinstance(self.heldout_size, int) or self.heldout_size < 1:
            raise ValueError(f"heldout_size must be an integer >= 1; got {self.heldout_size!r}")
        self._split                      # read the file(s) now: errors show up at construction

    @cached_property
    def _split(self) -> tuple[list[QA], list[QA], list[QA]]:
        """(worked examples for the prompt, training records, held-out records)."""
        records = load_gsm8k_jsonl(self.path)
        if self.heldout_path is not None:
            held, rest = load_gsm8k_jsonl(self.heldout_path), records
        else:
            order = list(range(len(records)))
            random.Random(HELDOUT_SEED).shuffle(order)
            if len(records) <= self.heldout_size + self.shots:
                raise ValueError(f"{self.path} holds {len(records)} records: too few for heldout_size="
                                 f"{self.heldout_size} + shots={self.shots} + at least one for training")
            held = [records[i] for i in order[:self.heldout_size]]
            rest = [records[i] for i in order[self.heldout_size:]]
        held_questions = {r.question for r in held}
        rest = [r for r in rest if r.question not in held_questions]
        shots, train = rest[:self.shots], rest[self.shots:]
        if not train:
            raise ValueError(f"{self.path}: no training records left once the held-out questions "
                             f"and {self.shots} worked examples are set aside")
        return shots, train, held

    @property
    def max_answer_chars(self) -> int:
        return max(len(r.solution) for r in self._split[1])

    def _problem(self, rec: QA) -> Problem:
        if self.prompt_format == "chat":
            return Problem(f"{rec.question}\n\n{self.INSTRUCTION}", rec.answer)
        lines = [f"Question: {s.question}\nAnswer: {s.answer}\n" for s in self._split[0]]
        return Problem("\n".join(lines + [f"Question: {rec.question}\nAnswer:"]), rec.answer)

    def generate(self, rng: random.Random) -> Problem:
        return self._problem(rng.choice(self._split[1]))

    @cached_property
    def _heldout_pool(self) -> list[Problem]:
        return [self._problem(r) for r in self._split[2]]

    def sample(self, n: int, rng=None) -> list[Problem]:
        """``n`` training problems drawn with replacement with ``rng`` (random.Random or int seed)."""
        rng = as_rng(rng)
        return [self.generate(rng) for _ in range(n)]

    def reward(self, problem: Problem, completion: str) -> float:
        return float(_same_number(extract_final_number(completion), problem.answer))

    def supervised_target(self, problem: Problem) -> str:
        return f" {problem.answer}"
