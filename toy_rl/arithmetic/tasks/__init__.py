"""Rung 2's tasks: arithmetic problems generated in code, each with a verifiable reward.

    get_task("add")          2-digit + and -, short answers             "47+28=" -> "75"
    get_task("countdown")    hit a target with + - * (many answers)    "make 24 from 3 5 8:" -> "3*8"
    get_task("scratchpad")   4-digit addition worked column by column  "4567+891:" -> "7+1+0=8 ... =5458"

Every task has ``sample(n, rng)``, ``heldout(n)``, ``reward(problem, completion)``,
``supervised_target(problem)`` and ``max_answer_chars`` (see ``base.Task``).

These are rung 2's names; the registry across rungs is :mod:`toy_rl.experiments.tasks`
(``make_task("arithmetic", "add")`` here, ``make_task("lm", "add")`` for rung 3's few-shot addition).
"""
from __future__ import annotations

from .add import AddTask
from .base import Problem, Task
from .countdown import CountdownTask
from .scratchpad import ScratchpadTask

TASKS: dict[str, type[Task]] = {t.name: t for t in (AddTask, CountdownTask, ScratchpadTask)}


def get_task(name: str, **params) -> Task:
    """The task called ``name``, with optional settings, e.g. ``get_task("add", digits=3)``."""
    if isinstance(name, Task):
        return name
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(TASKS)}")
    try:
        return TASKS[name](**params)
    except TypeError as err:
        raise ValueError(f"bad settings for task {name!r}: {err}") from None


__all__ = ["TASKS", "get_task", "Task", "Problem", "AddTask", "CountdownTask", "ScratchpadTask"]
