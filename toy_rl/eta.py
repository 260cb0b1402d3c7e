"""The old name of :mod:`toy_rl.timing` (η is this course's step size, not a time), kept for one round so that
``from toy_rl import eta`` and ``from toy_rl.eta import Plan, up_front`` keep working; new code imports
:mod:`toy_rl.timing` (the announcements) and :mod:`toy_rl.experiments.plan` (a plan of runs).

The rates moved to the rungs' backends (:mod:`toy_rl.bandit.backend`, :mod:`toy_rl.arithmetic.backend`,
:mod:`toy_rl.lm.backend`) and the rung-2 warm start's to :mod:`toy_rl.arithmetic.warmstart`; their old names here
(``RL_RATES``, ``warmstart_seconds``, ``bandit_seconds``, ...) are looked up there when asked for.
"""
from __future__ import annotations

import importlib

from .experiments.plan import Plan, run_seconds
from .timing import THRESHOLD, WHERE, Rate, announce, duration, on_cpu, quiet, say, up_front

_MOVED = {   # old name -> (module, name there)
    "bandit_seconds": ("toy_rl.bandit.backend", "comparison_seconds"),
    "BANDIT_COMPARE": ("toy_rl.bandit.backend", "COMPARE_RATE"),
    "warmstart_seconds": ("toy_rl.arithmetic.warmstart", "estimated_seconds"),
    "announce_warmstart": ("toy_rl.arithmetic.warmstart", "announce_training"),
    "WARMSTART_RATES": ("toy_rl.arithmetic.warmstart", "RATES"),
    "WARMSTART_HELDOUT": ("toy_rl.arithmetic.warmstart", "HELDOUT_SECONDS"),
}


def __getattr__(name: str):
    """The moved names, from their new homes; ``RL_RATES`` and ``BF16_RL_RATES`` keyed as before, by rung."""
    if name in _MOVED:
        module, attr = _MOVED[name]
        return getattr(importlib.import_module(module), attr)
    if name in ("RL_RATES", "BF16_RL_RATES"):
        arithmetic, lm = (importlib.import_module(f"toy_rl.{r}.backend") for r in ("arithmetic", "lm"))
        if name == "BF16_RL_RATES":
            return {("lm", task): rate for task, rate in lm.BF16_RL_RATES.items()}
        return {**{("arithmetic", *key): rate for key, rate in arithmetic.RL_RATES.items()},
                **{("lm", task, False): rate for task, rate in lm.RL_RATES.items()}}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["THRESHOLD", "WHERE", "Plan", "Rate", "announce", "duration", "on_cpu", "quiet", "run_seconds", "say",
           "up_front"]
