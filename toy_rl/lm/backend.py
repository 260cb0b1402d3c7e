"""What is about rungs 3-4 for the shared floors: their task registry (for :mod:`toy_rl.experiments.tasks`), the
measured rates of SmolLM2-135M's LoRA runs and their LoRA warm starts, as a plan of runs asks
(:class:`toy_rl.experiments.plan.Plan`); both find this module by the rung's name.

Its runs train in :mod:`toy_rl.lm.run`; a task with a ``warm_start`` starts from cached adapters
(:mod:`toy_rl.lm.warmstart`, which also holds the warm start's own measured rate, ``SECONDS_PER_STEP``). Only
SmolLM2-135M on the CPU is measured: another model (the tests' tiny one, a 7B) has no estimate.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..experiments.tasks import own_label
from ..timing import Rate, on_cpu
from .load import SMOLLM2
from .run import spec_dtype, spec_warm_start_label
from .tasks import ArithmeticTask, GSM8KTask, SearchTask
from .warmstart import estimated_seconds, is_cached

TRAINER = "toy_rl.lm.run"    # the module that trains this rung's runs (toy_rl.experiments.spec.backend)
DEFAULT_TASK = "add"

RUN_KIND = "LoRA"                   # how a plan names these runs

# ArithmeticTask settings (toy_rl.lm.tasks); measured greedy accuracy of SmolLM2-135M-Instruct.
LM_TASKS = {
    "add": dict(digits=2, op="+"),             # 2-digit addition: ~0.25-0.40
    "add3": dict(digits=3, op="+"),            # 3-digit addition: ~0.15
    "sub": dict(digits=2, op="-"),
    "mul": dict(digits=2, op="*", digits2=1),  # 2-digit x 1-digit: ~0.15
    # 2-digit addition with reasoning in a chat reply, up to 128 tokens, sampled at 0.6: ~0.10 sampled, 0.225
    # greedy; built for long failures, but the rung-3 pilot measured λ ≈ 1 (balanced): see lm.tasks.ArithmeticTask
    "add-cot": dict(digits=2, op="+", cot=True, prompt_format="chat"),
}
# SearchTask settings (toy_rl.lm.tasks): failed answers run on until the budget (λ > 1).
# "search-warm": the same after 50 steps of LoRA fine-tuning on worked answers (toy_rl.lm.warmstart), a
# negatives-dominate setting with ~60 % of sampled answers right; "search-hard-warm": numbers up to 30, ~23 % right,
# inside the protocol's 10-30 % (sampled accuracy and λ measured in toy_rl.lm.tasks.SearchTask's docstring).
LM_SEARCH_TASKS = {"search": dict(), "search-warm": dict(warm_start=50),
                   "search-hard-warm": dict(warm_start=50, max_number=30)}


# ------------------------------------------------------------------------------------------ tasks

def task_names() -> tuple[str, ...]:
    """The registry's names (a path to a GSM8K-format ``.jsonl`` file is also a task)."""
    return tuple(LM_TASKS) + tuple(LM_SEARCH_TASKS)


def make_task(task, prompt_format: str | None = None, **params):
    """An :class:`ArithmeticTask` or :class:`SearchTask` by name or, for a ``.jsonl`` path, a :class:`GSM8KTask`
    (a task object is returned as it is); ``prompt_format`` ("plain" or "chat") overrides the task's default."""
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
    raise ValueError(f"unknown task {task!r} for rungs 3-4; choose from {', '.join(task_names())} or a path to a "
                     "GSM8K-format .jsonl file")


def task_label(task) -> str:
    """The registry name ("add", "mul", "add-chat" for a plain task asked in a chat, "gsm8k-<file>",
    "search-warm"), else the task's own ``name``."""
    task = make_task(task)
    for name, fields in LM_TASKS.items():
        if type(task) is ArithmeticTask and all(getattr(task, k) == v for k, v in fields.items()) \
                and task.digits2 == fields.get("digits2") and task.shots == 3 \
                and task.cot == fields.get("cot", False) and task.cot_tokens == 128:
            chat = task.prompt_format == "chat" and fields.get("prompt_format") != "chat"
            return name + ("-chat" if chat else "")
    if isinstance(task, GSM8KTask):
        return "gsm8k-" + Path(task.path).stem
    for name, fields in LM_SEARCH_TASKS.items():
        if task == SearchTask(**fields):
            return name
    return own_label(task)


# ------------------------------------------------------------------------------------------ rates

# Seconds per RL update of one SmolLM2-135M run in float32, keyed by task, at the batch it was measured at
# (answers per update); 1 torch thread, held-out evaluation at the default schedule included; "logged": the sum
# of the per-update "seconds" in the runs' metrics.jsonl (wall time).
RL_RATES = {
    "add": Rate(
        8.2, 64, "logged: toy-rl figures --only 06 ran 3 runs of toy-rl lora --rule all --staleness 4, 40 updates "
                 "each, 986 s (runs/smollm2-135m-add, 2026-12-01, load 1.0)"),
    "search-warm": Rate(
        122.0, 64, "logged: toy-rl pilot --rung 3 --task search-warm, 2 runs x 8 updates of up to 96 tokens, 1,947 s "
                   "of runs, held-out evaluations included (runs/pilot/smollm2-135m-search-warm, 2026-12-02, load ~4)"),
    "search-hard-warm": Rate(
        175.5, 64, "logged: toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher bapo "
                   "--staleness 2 --seeds 2 --steps 8, 3 runs x 8 updates of up to 96 tokens, 4,212 s of runs, two "
                   "at a time (runs/smollm2-135m-search-hard-warm, 2026-12-03, load ~2)"),
    "add-cot": Rate(
        143.0, 64, "logged: toy-rl pilot --rung 3 --task add-cot, 2 runs x 8 updates of up to 128 tokens, 2,297 s "
                   "(runs/pilot/smollm2-135m-add-cot, 2026-11-30)"),
}

# The same, for runs in bf16 (dtype "bfloat16", or "auto" on a CPU with fast bf16) where measured apart.
BF16_RL_RATES = {
    "search-hard-warm": Rate(
        121.7, 64, "logged: toy-rl lora --task search-hard-warm --controls --rule symmetric clip-higher bapo "
                   "--staleness 2 --seeds 5 --dtype bfloat16 --micro-batch 16 --workers 2, BAPO's seeds 0 and 1, "
                   "7,178 s of runs for their first 59 updates, two at a time beside notebook builds and CI "
                   "(runs/smollm2-135m-search-hard-warm, 2026-12-05, AMD EPYC with AVX512-BF16, load ~3-4)"),
}


def rl_rate(task: str, max_new_tokens: int | None = None) -> Rate:
    """The measured float32 rate of runs of ``task``; an unmeasured task: the two measured ones at 5 and 128
    tokens ("add", "add-cot") interpolated by answer budget."""
    if task in RL_RATES:
        return RL_RATES[task]
    short, long = RL_RATES["add"], RL_RATES["add-cot"]
    t = min(1.0, max(0.0, ((max_new_tokens or 128) - 5) / (128 - 5)))
    return Rate(short.seconds + t * (long.seconds - short.seconds), short.batch, "interpolated by answer budget")


def run_rate(spec) -> Rate | None:
    """The rate of one update of ``spec``'s run (its bf16 rate where measured); None for a model other than
    SmolLM2-135M."""
    if spec.model != SMOLLM2:
        return None
    task = task_label(spec.task)
    if task in BF16_RL_RATES and spec_dtype(spec) == "bfloat16":
        return BF16_RL_RATES[task]
    return rl_rate(task, spec.rl.max_new_tokens)


def warm_starts(specs, named=()) -> list[tuple[str, float]]:
    """The LoRA warm starts the runs of ``specs`` (those with an estimate) train first, not cached yet, once
    each, as (task label, seconds)."""
    out = {}
    for s in specs:
        if not on_cpu(s.device) or run_rate(s) is None:
            continue
        task = make_task(s.task)
        steps = getattr(task, "warm_start", 0)
        label = task_label(task)
        if steps and label not in out and not is_cached(task, steps, spec_warm_start_label(s)):
            out[label] = estimated_seconds(steps)
    return list(out.items())


def describe_warm_starts(labels) -> str:
    return f"the rung-3 LoRA warm start for {', '.join(labels)} (not cached)"
