"""What is about rungs 3-4 for the shared floors: the measured rates of SmolLM2-135M's LoRA runs and their LoRA
warm starts, as a plan of runs asks (:class:`toy_rl.experiments.plan.Plan`, which finds this module by the rung's
name).

Its runs train in :mod:`toy_rl.lm.run`; a task with a ``warm_start`` starts from cached adapters
(:mod:`toy_rl.lm.warmstart`, which also holds the warm start's own measured rate, ``SECONDS_PER_STEP``). Only
SmolLM2-135M on the CPU is measured: another model (the tests' tiny one, a 7B) has no estimate.
"""
from __future__ import annotations

from ..experiments.tasks import make_task, task_label
from ..timing import Rate, on_cpu
from .load import SMOLLM2
from .run import spec_dtype, spec_warm_start_label
from .warmstart import estimated_seconds, is_cached

RUN_KIND = "LoRA"                   # how a plan names these runs

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
    task = task_label("lm", spec.task)
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
        task = make_task("lm", s.task)
        steps = getattr(task, "warm_start", 0)
        label = task_label("lm", task)
        if steps and label not in out and not is_cached(task, steps, spec_warm_start_label(s)):
            out[label] = estimated_seconds(steps)
    return list(out.items())


def describe_warm_starts(labels) -> str:
    return f"the rung-3 LoRA warm start for {', '.join(labels)} (not cached)"
