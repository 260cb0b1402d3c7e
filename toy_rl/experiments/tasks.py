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
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

RUNGS = ("bandit", "arithmetic", "lm")

# Rungs 3-4: ArithmeticTask settings (toy_rl.lm.tasks); measured greedy accuracy of SmolLM2-135M-Instruct.
LM_TASKS = {
    "add": dict(digits=2, op="+"),             # 2-digit addition: ~0.25-0.40
    "add3": dict(digits=3, op="+"),            # 3-digit addition: ~0.15
    "sub": dict(digits=2, op="-"),
    "mul": dict(digits=2, op="*", digits2=1),  # 2-digit x 1-digit: ~0.15
    # 2-digit addition with reasoning in a chat reply, up to 128 tokens, sampled at 0.6: ~0.10 sampled, 0.225
    # greedy; built for long failures, but the rung-3 pilot measured λ ≈ 1 (balanced): see lm.tasks.ArithmeticTask
    "add-cot": dict(digits=2, op="+", cot=True, prompt_format="chat"),
}
# Rungs 3-4: SearchTask settings (toy_rl.lm.tasks): failed answers run on until the budget (λ > 1).
# "search-warm": the same after 50 steps of LoRA fine-tuning on worked answers (toy_rl.lm.warmstart), a
# negatives-dominate setting with ~60 % of sampled answers right; "search-hard-warm": numbers up to 30, ~23 % right,
# inside the protocol's 10-30 % (sampled accuracy and λ measured in toy_rl.lm.tasks.SearchTask's docstring).
LM_SEARCH_TASKS = {"search": dict(), "search-warm": dict(warm_start=50),
                   "search-hard-warm": dict(warm_start=50, max_number=30)}


def check_rung(rung: str) -> str:
    if rung not in RUNGS:
        raise ValueError(f"rung must be one of {', '.join(RUNGS)}; got {rung!r}")
    return rung


def task_names(rung: str) -> tuple[str, ...]:
    """The task names ``rung`` knows (rungs 3-4 also take a path to a GSM8K-format ``.jsonl`` file)."""
    if check_rung(rung) == "bandit":
        from ..bandit.rewards import PRESETS
        return tuple(PRESETS)
    if rung == "arithmetic":
        from ..arithmetic.tasks import TASKS
        return tuple(TASKS)
    return tuple(LM_TASKS) + tuple(LM_SEARCH_TASKS)


def make_task(rung: str, task="add", prompt_format: str | None = None, **params):
    """The task of ``rung`` called ``task`` (a task object is returned as it is).

    rung 1: the preset name itself (the bandit builds its reward table from its config);
    rung 2: :func:`toy_rl.arithmetic.tasks.get_task` (``params`` e.g. ``digits=3``);
    rungs 3-4: an :class:`toy_rl.lm.ArithmeticTask` or, for a ``.jsonl`` path, a :class:`toy_rl.lm.GSM8KTask`;
    ``prompt_format`` ("plain" or "chat") overrides the task's default.
    """
    if check_rung(rung) == "bandit":
        if task not in task_names("bandit"):
            raise ValueError(f"unknown task {task!r} for rung 1 (a reward preset); choose from "
                             f"{', '.join(task_names('bandit'))}")
        return task
    if rung == "arithmetic":
        from ..arithmetic.tasks import get_task
        return get_task(task, **params)
    return _lm_task(task, prompt_format, params)


def _lm_task(task, prompt_format, params):
    from ..lm.tasks import ArithmeticTask, GSM8KTask, SearchTask
    extra = {} if prompt_format is None else {"prompt_format": prompt_format}
    if not isinstance(task, str):
        if prompt_format is not None and getattr(task, "prompt_format", None) != prompt_format:
            task = dataclasses.replace(task, prompt_format=prompt_format)
        return task
    if task in LM_TASKS:
        return ArithmeticTask(**{**LM_TASKS[task], **params, **extra})
    if task in LM_SEARCH_TASKS:
        return SearchTask(**{**LM_SEARCH_TASKS[task], **params, **extra})
    if task.endswith(".jsonl"):
        return GSM8KTask(task, **params, **extra)
    raise ValueError(f"unknown task {task!r} for rungs 3-4; choose from {', '.join(task_names('lm'))} or a path to a "
                     "GSM8K-format .jsonl file")


def slug(text) -> str:
    """A string safe as one folder name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-") or "task"


def task_label(rung: str, task) -> str:
    """The short name of a task in folders and tables: the registry name ("add", "mul", "add-chat",
    "gsm8k-<file>", "rare-correct"), else the task's own ``name``."""
    if isinstance(task, str) and check_rung(rung) != "lm":
        return slug(task)
    if rung == "lm":
        from ..lm.tasks import ArithmeticTask, GSM8KTask
        task = make_task("lm", task)
        for name, fields in LM_TASKS.items():
            if type(task) is ArithmeticTask and all(getattr(task, k) == v for k, v in fields.items()) \
                    and task.digits2 == fields.get("digits2") and task.shots == 3 \
                    and task.cot == fields.get("cot", False) and task.cot_tokens == 128:
                chat = task.prompt_format == "chat" and fields.get("prompt_format") != "chat"
                return name + ("-chat" if chat else "")
        if isinstance(task, GSM8KTask):
            return "gsm8k-" + Path(task.path).stem
        from ..lm.tasks import SearchTask
        for name, fields in LM_SEARCH_TASKS.items():
            if task == SearchTask(**fields):
                return name
    return slug(getattr(task, "name", type(task).__name__))
