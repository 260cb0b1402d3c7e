"""No long surprise: before a command trains for more than ~30 s, it says so in one line, with an estimate.

On a fresh clone the long waits are the rung-2 warm starts (cached under ``~/.cache/toy_rl/warmstart`` once
trained) and the runs a figure, report or notebook reads from ``runs/`` when they are there and trains when
they are not. Every place that trains them asks first::

    with up_front(Plan(specs=todo)):     # prints e.g. "training 36 rung-2 runs not found under
        ...                              #   runs/arithmetic-add (200 updates each): about 4 min on
                                         #   2 CPU cores", then keeps the inner steps quiet

This module is the mechanism only, about no rung: a measured :class:`Rate`, how a duration is said, and when a
line is printed. The line goes to stderr (``--json`` output stays clean), only when the estimate is above
:data:`THRESHOLD` seconds, and once: a command that announced its whole plan (``toy-rl figures``) silences the
announcements of the steps inside it. What a plan of runs costs is summed by
:class:`toy_rl.experiments.plan.Plan`, from the rates each rung declares in its ``backend`` module
(:mod:`toy_rl.bandit.backend`, :mod:`toy_rl.arithmetic.backend`, :mod:`toy_rl.lm.backend`).

The rates are measured, not guessed, each with the command that measured it, on this project's shared 2-core
x86_64 CPU with 1 torch thread per run (the default everywhere). A rate is scaled linearly to another batch
shape (and a warm start to another model size); runs at once (``workers``) divide the total. A busy machine is
slower: at a load average of 5-6 on the 2 cores, wall times were 1.6-2x these.
"""
from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

THRESHOLD = 30.0          # seconds: shorter work is not announced
WHERE = "on 2 CPU cores"


@dataclass(frozen=True)
class Rate:
    seconds: float        # per update (RL) or per training step (warm start), evaluation included
    batch: int            # answers per update (prompts × group size) or sequences per step it was measured at
    measured: str         # the command that measured it, and when


_quiet = 0


def duration(seconds: float) -> str:
    """'about 40 s', 'about 6 min', 'about 1 h 10 min'."""
    if seconds < 90:
        return f"about {max(10, round(seconds / 10) * 10):.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet():
    """Inside: no announcements (the caller has announced the whole plan already)."""
    global _quiet
    _quiet += 1
    try:
        yield
    finally:
        _quiet -= 1


def announce(what: str, seconds: float | None, up_to: bool = False) -> bool:
    """Print "<what>: about <time> on 2 CPU cores" to stderr if ``seconds`` is above :data:`THRESHOLD` (and no
    caller keeps this quiet); ``up_to``: the work may stop earlier. True if it printed."""
    if _quiet or seconds is None or seconds <= THRESHOLD:
        return False
    say(f"{what}: {'up to ' if up_to else ''}{duration(seconds)} {WHERE}")
    return True


def on_cpu(device) -> bool:
    """Whether ``device`` ("cpu", "cuda[:n]", "auto") runs on the CPU, where the measured rates hold."""
    if str(device).startswith("cuda"):
        return False
    if device == "auto":
        import torch
        return not torch.cuda.is_available()
    return True


@contextlib.contextmanager
def up_front(plan):
    """Announce ``plan`` (anything with ``describe()`` and ``seconds()``, e.g. a
    :class:`toy_rl.experiments.plan.Plan`) if it is long, in one line before anything runs, and keep the steps
    inside quiet; only the outermost plan speaks. An empty plan (false) says nothing."""
    if not _quiet and plan:
        what = plan.describe()
        if what:
            announce(what, plan.seconds())
    with quiet():
        yield
