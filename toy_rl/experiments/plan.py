"""What a command is about to train, and how long that takes: :class:`Plan`, announced by
:func:`toy_rl.timing.up_front`.

    with up_front(Plan(specs=todo, workers=2)):      # "training 36 rung-2 runs not found under runs/...
        sweep(todo)                                  #   (200 updates each, 2 at once): about 4 min on 2 CPU cores"

The plan is about no rung: it asks each rung's ``backend`` module (found by name:
:func:`toy_rl.experiments.tasks.rung_backend`) for what is about that rung:

    RUN_KIND                     how the plan names its runs ("rung-2", "LoRA")
    run_rate(spec)               the measured :class:`toy_rl.timing.Rate` of one update of the run (None: none)
    warm_starts(specs, named)    the warm starts its runs train first, not cached yet: [(label, seconds)] once each
    describe_warm_starts(labels) how the plan names them

A run's estimate is its updates still to run (a resumed run continues after its last logged update) times its
rate, scaled by answers per update; on the CPU only (the rates are measured there).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..timing import on_cpu
from .layout import run_dir
from .tasks import RUNGS, rung_backend

NAMED_WARM_STARTS = "arithmetic"      # the rung whose warm starts a plan names outright (Plan.warmstarts)


def steps_left(spec) -> int:
    """Updates still to run (a resumed run continues after its last logged update)."""
    metrics = run_dir(spec) / "metrics.jsonl"
    done = 0
    if metrics.is_file():
        try:
            lines = metrics.read_text().strip().splitlines()
            done = int(json.loads(lines[-1]).get("step", 0)) if lines else 0
        except (OSError, ValueError):
            done = 0
    return max(0, spec.rl.steps - done)


def run_seconds(spec) -> float | None:
    """Estimated seconds to train (or finish) one run; None where no rate applies (a GPU, a run the backend has
    no rate for: rung 1's bandit, which runs in seconds, or a model other than SmolLM2-135M on rungs 3-4)."""
    if not on_cpu(spec.device):
        return None
    rate = rung_backend(spec.rung).run_rate(spec)
    if rate is None:
        return None
    answers = spec.rl.prompts * spec.rl.group_size
    return steps_left(spec) * rate.seconds * answers / rate.batch


@dataclass
class Plan:
    """What a command is about to train: ``specs`` (runs not finished yet), ``warmstarts`` ((task, config) pairs
    of rung 2's warm starts, trained first when not cached), ``extra`` ((what, seconds) of other work, e.g.
    rung 1's comparison); ``workers``: runs at once."""
    specs: list = field(default_factory=list)
    warmstarts: list = field(default_factory=list)
    extra: list = field(default_factory=list)
    workers: int = 1

    def __add__(self, other: "Plan") -> "Plan":
        return Plan(self.specs + other.specs, self.warmstarts + other.warmstarts, self.extra + other.extra,
                    max(self.workers, other.workers))

    def __bool__(self) -> bool:
        return bool(self.specs or self.warmstarts or self.extra)

    def _warm(self) -> list:
        """[(backend, [(label, seconds)])] of the warm starts not cached yet, rung by rung."""
        out = []
        for rung in RUNGS:
            specs = [s for s in self.specs if s.rung == rung]
            named = self.warmstarts if rung == NAMED_WARM_STARTS else []
            if specs or named:
                be = rung_backend(rung)
                warm = be.warm_starts(specs, named) if hasattr(be, "warm_starts") else []
                if warm:
                    out.append((be, warm))
        return out

    def seconds(self) -> float:
        runs = [run_seconds(s) for s in self.specs]
        total = sum(r for r in runs if r) / max(1, min(self.workers, len(self.specs) or 1))
        warm = sum(seconds for _, todo in self._warm() for _, seconds in todo)
        return total + warm + sum(s for _, s in self.extra)

    def describe(self) -> str:
        parts = []
        groups: dict = {}
        for s in self.specs:
            if run_seconds(s):
                groups.setdefault(s.rung, []).append(s)
        for rung, specs in groups.items():
            steps = sorted({s.rl.steps for s in specs})
            each = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
            parts.append(f"{len(specs)} {rung_backend(rung).RUN_KIND} run{'s' if len(specs) > 1 else ''} not found "
                         f"under {_common_folder(specs)} ({each} updates each"
                         + (f", {self.workers} at once" if self.workers > 1 else "") + ")")
        parts += [be.describe_warm_starts([label for label, _ in todo]) for be, todo in self._warm()]
        parts += [what for what, s in self.extra if s]
        if not parts:
            return ""
        return "training " + (parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1])


def _common_folder(specs) -> str:
    folders = {str(run_dir(s).parents[2]) for s in specs}
    return folders.pop() if len(folders) == 1 else os.path.commonpath(sorted(folders)) or "."
