"""One task registry for every rung, keyed by rung: the same short name means one task per rung.

    make_task("bandit", "rare-correct")     rung 1: a reward preset of the tabular bandit (toy_rl.bandit.rewards)
    make_task("arithmetic", "add")          rung 2: 2-digit + and - for the character-level GPT, "47+28=" -> "75"
    make_task("lm", "add")                  rungs 3-4: 2-digit addition asked of a pretrained LM with a 3-shot prompt
    make_task("lm", "add-cot")              rungs 3-4: the same asked in a chat with reasoning first (long failures)
    make_task("lm", "search")               rungs 3-4: find a pair summing to a target, trying pairs aloud (long failures)
    make_task("lm", "search-warm")          the same from a 50-step LoRA warm start (negatives dominate; ~60 % right)
    make_task("lm", "search-hard-warm")     the same with numbers up to 30 (negatives dominate; ~23 % right)
    make_task("lm", "gsm8k.jsonl")          rungs 3-4: question/answer pairs from a local GSM8K-format file

Rung 2's "add" and rung 3's "add" are different tasks (different prompts, answers and tokenizers), so a name
is only looked up together with its rung; each command (``toy-rl arithmetic``, ``toy-rl lora``) knows its
rung, so ``--task add`` works for both. ``task_label`` gives the short name that run folders and tables use.

Each rung keeps its own names in its ``backend`` module (:func:`rung_backend`, found by the rung's name:
:mod:`toy_rl.bandit.backend`, :mod:`toy_rl.arithmetic.backend`, :mod:`toy_rl.lm.backend`), which has
``task_names()``, ``make_task(task, prompt_format, **params)`` and ``task_label(task)``; this registry asks it.
"""
from __future__ import annotations

import importlib
import re

RUNGS = ("bandit", "arithmetic", "lm")


def check_rung(rung: str) -> str:
    if rung not in RUNGS:
        raise ValueError(f"rung must be one of {', '.join(RUNGS)}; got {rung!r}")
    return rung


def rung_backend(rung: str):
    """``toy_rl.<rung>.backend``: what is about ``rung`` (its tasks, its measured rates, its warm starts)."""
    return importlib.import_module(f"toy_rl.{check_rung(rung)}.backend")


def task_names(rung: str) -> tuple[str, ...]:
    """The task names ``rung`` knows (rungs 3-4 also take a path to a GSM8K-format ``.jsonl`` file)."""
    return tuple(rung_backend(rung).task_names())


def make_task(rung: str, task="add", prompt_format: str | None = None, **params):
    """The task of ``rung`` called ``task`` (a task object is returned as it is).

    rung 1: the preset name itself (the bandit builds its reward table from its config);
    rung 2: :func:`toy_rl.arithmetic.tasks.get_task` (``params`` e.g. ``digits=3``);
    rungs 3-4: an :class:`toy_rl.lm.ArithmeticTask` or, for a ``.jsonl`` path, a :class:`toy_rl.lm.GSM8KTask`;
    ``prompt_format`` ("plain" or "chat") overrides the task's default.
    """
    return rung_backend(rung).make_task(task, prompt_format, **params)


def slug(text) -> str:
    """A string safe as one folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "task"


def own_label(task) -> str:
    """A task's short name when its rung has no other: the name it was given, else the task's own ``name``."""
    return slug(task if isinstance(task, str) else getattr(task, "name", type(task).__name__))


def task_label(rung: str, task) -> str:
    """The short name of a task in folders and tables: the registry name ("add", "mul", "add-chat",
    "gsm8k-<file>", "rare-correct"), else the task's own ``name``."""
    return rung_backend(rung).task_label(task)
