"""One run, described by one config (as CleanRL's single ``Args``): :class:`RunSpec`.

    spec = make_spec("arithmetic", "add", rule="bapo", staleness=4, seed=0)        # rung 2, its defaults
    spec = make_spec("lm", "add", rule="clip-higher", preset="qwen2.5-7b", model="/models/q7")   # rung 4
    specs = grid("bandit", rules=RULES, stalenesses=(0, 2, 4, 8), seeds=range(20))  # rung 1, a whole sweep

A spec holds the rung-level settings (which backend, task, model, preset, smoke, where, threads, device) and
the :class:`toy_rl.rl.config.RLConfig` of the run (rule, staleness, mode, partial, steps, seed, lr, batch
shape, ...), which checks its own fields. :func:`make_spec` fills the RLConfig from the backend's defaults:
``DEFAULTS`` of the rung, then what the task and the preset set (answer budget, batch shape, lr), then the
backend's ``SMOKE`` settings with ``smoke=True`` (``steps`` capped at SMOKE's), then what is given.

The module that trains a rung's runs is named by the rung's backend (``TRAINER`` in ``toy_rl.<rung>.backend``,
found by :func:`toy_rl.experiments.tasks.rung_backend`; ``DEFAULT_TASK`` there too): ``toy_rl.bandit.experiments``
(rung 1), ``toy_rl.arithmetic.run`` (rung 2), ``toy_rl.lm.run`` (rungs 3-4). Each trainer has ``DEFAULTS``, ``SMOKE``,
``OPTIONS`` (its own settings outside RLConfig, with their defaults), ``rl_defaults(task, preset)`` and
``train(spec, folder)``; optionally ``train_seeds(specs, folders)`` (a cell's seeds side by side, rung 1),
``saved_config(spec)`` (its own config.json), ``check_spec(spec)`` and ``default_model(preset)`` (rungs 3-4).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..clipping import RULES
from ..rl.config import RLConfig
from .tasks import RUNGS, check_rung, make_task, rung_backend


def backend(rung: str):
    """The module that trains runs of ``rung`` (its backend's ``TRAINER``)."""
    return importlib.import_module(rung_backend(rung).TRAINER)


def rl_fields() -> set[str]:
    return {f.name for f in dataclasses.fields(RLConfig)}


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines one run.

    rung: "bandit" (rung 1), "arithmetic" (rung 2) or "lm" (rungs 3-4).
    task: a name of :func:`toy_rl.experiments.tasks.task_names` for the rung, or a task object.
    rl: the run's :class:`~toy_rl.rl.config.RLConfig` (rule, staleness, mode, partial, steps, seed, lr, ...).
    model: rungs 3-4: a model name or path (:func:`toy_rl.lm.load.load_model`) or a zero-argument callable
        returning a policy (the tests' tiny Llama); None: the preset's, else SmolLM2-135M-Instruct. Unused by
        rungs 1-2 (rung 2 starts from its warm start, the ``warmstart`` option).
    preset: rungs 3-4: a :class:`toy_rl.lm.presets.Preset` or its name (model, dtype, LoRA, checkpointing,
        batch shape, lr).
    smoke: a few updates on small batches (the backend's SMOKE), in a ``-smoke`` folder.
    out: root of the run folders (:mod:`toy_rl.experiments.layout`); run_dir: this run's own folder instead.
    threads: torch CPU threads during the run (1: small models are fastest on one; None: torch's choice).
    device: "auto" (CUDA if available), "cpu" or "cuda" (rungs 2-4).
    progress: progress bars. resume: reuse a finished run and continue an interrupted one (False: start over).
    options: the backend's own settings (its ``OPTIONS``): rung 1 n_tokens, pg, task_seed, dtype; rung 2
        warmstart (a :class:`~toy_rl.arithmetic.warmstart.WarmstartConfig`; None: the task's own, the tiny one
        with ``smoke``); rungs 3-4 dtype (over the preset's), keep_batches, hold_graphs.
    """
    rung: str = "arithmetic"
    task: Any = "add"
    rl: RLConfig = field(default_factory=RLConfig)
    model: Any = None
    preset: Any = None
    smoke: bool = False
    out: str | Path = "runs"
    threads: int | None = 1
    device: str = "auto"
    progress: bool = True
    resume: bool = True
    run_dir: str | Path | None = None
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        check_rung(self.rung)
        if not isinstance(self.rl, RLConfig):
            raise ValueError(f"rl must be an RLConfig; got {type(self.rl).__name__}")
        t = self.threads
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ValueError(f"threads must be an integer >= 1 or None; got {t!r}")
        if not isinstance(self.device, str):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:<n>'; got {self.device!r}")
        be = backend(self.rung)
        unknown = sorted(set(self.options) - set(be.OPTIONS))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown} for rung {self.rung!r}; it has {sorted(be.OPTIONS)}")
        make_task(self.rung, self.task)                 # an unknown task fails here, before any training
        if self.preset is not None and not hasattr(be, "default_model"):
            raise ValueError(f"preset is for rungs 3-4 (rung 'lm'); got preset={self.preset!r} for {self.rung!r}")
        if self.model is None and hasattr(be, "default_model"):
            object.__setattr__(self, "model", be.default_model(self.preset))   # also checks the preset's name
        if hasattr(be, "check_spec"):
            be.check_spec(self)                         # the backend's own checks (rung 1: its BanditConfig)

    def option(self, name: str):
        """The backend setting ``name``: given in ``options``, else the backend's default."""
        return self.options.get(name, backend(self.rung).OPTIONS[name])

    def replace(self, **changes) -> "RunSpec":
        """A copy with some fields changed; RLConfig fields (rule, seed, steps, ...) change ``rl``."""
        rl = {k: changes.pop(k) for k in list(changes) if k in rl_fields()}
        if rl:
            changes["rl"] = dataclasses.replace(changes.get("rl", self.rl), **rl)
        return dataclasses.replace(self, **changes)


SPEC_FIELDS = {f.name for f in dataclasses.fields(RunSpec)} - {"rung", "task", "rl", "options"}


def make_spec(rung: str = "arithmetic", task=None, **settings) -> RunSpec:
    """A :class:`RunSpec` with the backend's defaults. ``settings``: any RunSpec field (model, preset, smoke,
    out, threads, device, progress, resume, run_dir), any RLConfig field (rule, staleness, mode, partial, steps,
    seed, lr, prompts, ...) or a backend option; anything else is a ValueError naming it."""
    be = backend(rung)
    task = rung_backend(rung).DEFAULT_TASK if task is None else task
    spec_kw = {k: settings.pop(k) for k in list(settings) if k in SPEC_FIELDS}
    options = {k: settings.pop(k) for k in list(settings) if k in be.OPTIONS}
    unknown = sorted(set(settings) - rl_fields())
    if unknown:
        raise ValueError(f"unknown setting(s) {unknown}; a run takes RunSpec fields {sorted(SPEC_FIELDS)}, "
                         f"RLConfig fields {sorted(rl_fields())} and, for rung {rung!r}, {sorted(be.OPTIONS)}")
    smoke = spec_kw.get("smoke", False)
    kw = dict(be.DEFAULTS)
    kw.update(be.rl_defaults(make_task(rung, task), spec_kw.get("preset")))
    steps = settings.pop("steps", None)
    steps = kw["steps"] if steps is None else steps
    if smoke:
        kw.update(be.SMOKE)
        steps = min(steps, be.SMOKE["steps"])
    kw.update(settings, steps=steps)
    return RunSpec(rung=rung, task=task, rl=RLConfig(**kw), options=options, **spec_kw)


def scenarios(stalenesses=(0,), partial: int | None = None) -> list[tuple[int, int | None]]:
    """(staleness, partial) of each scenario: every staleness, then partial rollout (at staleness 0) if given."""
    return [(k, None) for k in stalenesses] + ([(0, partial)] if partial is not None else [])


def grid(rung: str = "arithmetic", task=None, rules=RULES, stalenesses=(0,), seeds=range(3), mode: str = "reuse",
         partial: int | None = None, **settings) -> list[RunSpec]:
    """Every (scenario, rule) × seed, scenario first: the specs of a comparison (pass them to
    :func:`toy_rl.experiments.sweep`). ``settings`` as in :func:`make_spec`; rules are names or rule objects."""
    rules, seeds, stalenesses = list(rules), list(seeds), list(stalenesses)
    if not rules or not seeds or (not stalenesses and partial is None):
        raise ValueError("a grid needs at least one rule, one seed and one scenario (a staleness or partial)")
    return [make_spec(rung, task, rule=rule, staleness=k, mode=mode, partial=b, seed=seed, **settings)
            for k, b in scenarios(stalenesses, partial) for rule in rules for seed in seeds]


__all__ = ["RULES", "RUNGS", "RunSpec", "backend", "grid", "make_spec", "scenarios"]
