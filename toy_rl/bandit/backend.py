"""What is about rung 1 for the shared floors: its tasks (the reward presets, for the registry
:mod:`toy_rl.experiments.tasks`) and the measured time of its comparison, as the up-front estimate
(:mod:`toy_rl.timing`) asks.

A single bandit run takes seconds, so a plan of runs (:class:`toy_rl.experiments.plan.Plan`) has no rate for it
(:func:`run_rate` is None); what takes long is a whole comparison or grid, estimated by
:func:`comparison_seconds` and announced by its caller. Its runs train in :mod:`toy_rl.bandit.experiments`.
"""
from __future__ import annotations

from ..experiments.tasks import own_label
from ..timing import Rate

TRAINER = "toy_rl.bandit.experiments"    # the module that trains this rung's runs (toy_rl.experiments.spec.backend)
DEFAULT_TASK = "rare-correct"

# The default bandit comparison (9 rules x 4 cells, 20 seeds x 300 updates), scaled by seeds x updates.
COMPARE_RATE = Rate(49.6, 20 * 300, "toy-rl figures --only 02: 49.6 s (docs/figures/captions.json, 2026-12-01, "
                                    "load ~3)")


def comparison_seconds(seeds: int, steps: int, cells: int = 4, rules: int = 9) -> float:
    """Rung 1's comparison: the measured time scaled by seeds x updates x cells x rules."""
    return COMPARE_RATE.seconds * seeds * steps / COMPARE_RATE.batch * cells / 4 * rules / 9


def task_names() -> tuple[str, ...]:
    """The reward presets (:data:`toy_rl.bandit.rewards.PRESETS`)."""
    from .rewards import PRESETS
    return tuple(PRESETS)


def make_task(task, prompt_format=None, **params) -> str:
    """The preset name itself (the bandit builds its reward table from its config); ``prompt_format`` and
    ``params`` are not used."""
    if task not in task_names():
        raise ValueError(f"unknown task {task!r} for rung 1 (a reward preset); choose from {', '.join(task_names())}")
    return task


task_label = own_label


def run_rate(spec) -> None:
    """No rate: one run takes seconds."""
    return None
