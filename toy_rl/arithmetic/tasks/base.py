"""Rung 2's task helpers: reading a number or a final answer out of a completion, and the numbers of a
countdown or search prompt.

The task interface itself (:class:`Task`, :class:`Problem`, the held-out pool, ``as_rng``) is shared by every rung
and lives in :mod:`toy_rl.rl.tasks`; it is re-exported here, where rung 2's tasks and older code import it.
"""
from __future__ import annotations

import re

from ...rl.tasks import HELDOUT_POOL, HELDOUT_SEED, Problem, Task, as_rng

_INT = re.compile(r"-?\d{1,12}")


def numbers_and_target(prompt: str, verb: str) -> tuple[tuple[int, ...], int]:
    """'<verb> 24 from 3 5 8:' -> ((3, 5, 8), 24): the prompt of countdown ("make") and search ("sum")."""
    head, _, tail = prompt.rstrip(":").partition(" from ")
    return tuple(int(x) for x in tail.split()), int(head.removeprefix(verb + " "))


def parse_int(text: str) -> int | None:
    """'  -42 ' -> -42; anything that is not one plain integer -> None."""
    text = text.strip()
    return int(text) if _INT.fullmatch(text) else None


def final_answer(completion: str) -> str:
    """The text after the last '=' (the whole completion if there is none), without spaces."""
    return completion.rsplit("=", 1)[-1].strip()


__all__ = ["HELDOUT_POOL", "HELDOUT_SEED", "Problem", "Task", "as_rng", "final_answer", "numbers_and_target",
           "parse_int"]
