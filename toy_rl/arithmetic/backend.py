"""What is about rung 2 for the shared floors: its tasks (for the registry :mod:`toy_rl.experiments.tasks`), its
measured rates and its warm starts, as a plan of runs asks (:class:`toy_rl.experiments.plan.Plan`); both find
this module by the rung's name.

Its runs train in :mod:`toy_rl.arithmetic.run`; each starts from a cached supervised warm start
(:mod:`toy_rl.arithmetic.warmstart`, which also holds the warm start's own measured rates, ``RATES``).
"""
from __future__ import annotations

from ..experiments.tasks import own_label
from ..timing import Rate
from .run import warmstart_of
from .tasks import TASKS, get_task
from .warmstart import cache_path, estimated_seconds

TRAINER = "toy_rl.arithmetic.run"    # the module that trains this rung's runs (toy_rl.experiments.spec.backend)
DEFAULT_TASK = "add"

RUN_KIND = "rung-2"                 # how a plan names these runs

# Seconds per RL update of one run, keyed by (task, partial rollout?), at the batch it was measured at (answers per
# update); 1 torch thread, held-out evaluation at the default schedule included. "Logged": the sum of the
# per-update "seconds" in the runs' metrics.jsonl (wall time); "CPU": time.process_time() around
# toy_rl.experiments.run of the same spec the command makes, on a machine at load ~6 (so wall was 1.6x that).
RL_RATES = {
    ("add", False): Rate(
        0.038, 128, "toy-rl arithmetic --task add --rule all --staleness 0 2 4 8 --seeds 1: 12 runs x 200 updates, "
                    "97 CPU-s (188 s wall at load 5.5), 2026-12-01"),
    ("countdown", False): Rate(
        0.11, 128, "toy-rl arithmetic --task countdown --rule symmetric --steps 100 --seeds 1: 11.1 CPU-s (17 s wall "
                   "at load 6.3), 2026-12-01"),
    ("scratchpad", False): Rate(
        0.46, 128, "toy-rl arithmetic --task scratchpad --rule symmetric --steps 50 --seeds 1: 23.2 CPU-s (40 s wall "
                   "at load 6.2), 2026-12-01"),
    ("scratchpad", True): Rate(
        0.086, 128, "logged: toy-rl figures --only 05 ran 15 runs of toy-rl arithmetic --task scratchpad --partial 8, "
                    "200 updates each, 258 s (runs/arithmetic-scratchpad, 2026-12-01, load 1.4); CPU at load 6: 0.10"),
    ("search", False): Rate(
        0.52, 128, "logged: toy-rl arithmetic --compare long-failures --seeds 10 --workers 2, 90 runs x 120 updates, "
                   "6,000 s of runs in 52 min, two at a time (runs/compare, 2026-12-01); one run alone, 40 updates: "
                   "0.65 CPU-s per update at load 6"),
    ("search", True): Rate(
        0.43, 128, "logged: toy-rl arithmetic --compare long-failures-partial --seeds 10 --workers 2, 40 runs x 120 "
                   "steps of partial rollout (8 tokens per answer per step), 2,071 s of runs, two at a time at load "
                   "4-6 (runs/compare/long-failures-partial, 2026-12-02); 0.17 CPU-s per step; one run alone at load "
                   "2-3: 0.20 s per step"),
}


def task_names() -> tuple[str, ...]:
    return tuple(TASKS)


def make_task(task, prompt_format=None, **params):
    """:func:`toy_rl.arithmetic.tasks.get_task` (``params`` e.g. ``digits=3``; no prompt formats here)."""
    return get_task(task, **params)


task_label = own_label


def rl_rate(task: str, partial: bool) -> Rate:
    """The measured rate of runs of ``task`` (without partial rollout where that is not measured apart); an
    unmeasured task takes the slowest rate."""
    return (RL_RATES.get((task, partial)) or RL_RATES.get((task, False))
            or max(RL_RATES.values(), key=lambda r: r.seconds / r.batch))


def run_rate(spec) -> Rate:
    """The rate of one update of ``spec``'s run."""
    return rl_rate(task_label(spec.task), spec.rl.partial is not None)


def warm_starts(specs, named) -> list[tuple[str, float]]:
    """The warm starts not cached yet, once each, as (task name, seconds): those ``named`` ((task, config)
    pairs), then those the runs of ``specs`` start from."""
    pairs = list(named) + [(s.task, warmstart_of(s)) for s in specs]
    out, seen = [], set()
    for task, config in pairs:
        path = cache_path(task, config)
        if path not in seen and not path.exists():
            seen.add(path)
            out.append((get_task(task).name, estimated_seconds(task, config)))
    return out


def describe_warm_starts(names) -> str:
    return f"the rung-2 warm start{'s' if len(names) > 1 else ''} for {', '.join(sorted(set(names)))} (not cached)"
