"""One folder layout for the runs of every rung::

    <out>/<rung or model>-<task>[-smoke]/<scenario>/<rule>/seed<k>/
        config.json  metrics.jsonl  (checkpoint.pt; rungs 3-4: batches.pt)

    runs/bandit-rare-correct/reuse-4/bapo/seed0/          rung 1
    runs/arithmetic-add/on-policy/clip-higher/seed3/      rung 2
    runs/smollm2-135m-add/partial-8/symmetric/seed0/      rung 3 (rung 4: the model's name)

``<scenario>`` is "on-policy", "reuse-K" (one rollout serves K+1 updates), "lag-K" (the behaviour policy is
K updates old) or "partial-B" (at most B new tokens per answer per update); ``<rule>`` is
:func:`toy_rl.rl.config.rule_label` of the rule ("bapo", "clip-higher", "fixed-0.6-1.2", ...).
"""
from __future__ import annotations

from pathlib import Path

from ..rl.config import rule_label
from .tasks import slug, task_label


def scenario_name(staleness: int = 0, mode: str = "reuse", partial: int | None = None) -> str:
    """"on-policy", "reuse-4", "lag-2" or "partial-8" (a token budget of 8 per answer per update)."""
    if partial is not None:
        return f"partial-{partial}"
    return "on-policy" if staleness == 0 else f"{mode}-{staleness}"


def model_label(model) -> str:
    """'smollm2-135m', the last part of a path or hub name, or a factory's __name__."""
    if callable(model):
        return slug(getattr(model, "__name__", "custom"))
    return slug(Path(str(model)).name.removesuffix(".gguf"))


def experiment_name(rung: str, task, model=None, smoke: bool = False) -> str:
    """``<rung or model>-<task>[-smoke]``: "bandit-rare-correct", "arithmetic-add", "smollm2-135m-add-smoke"."""
    head = model_label(model) if rung == "lm" else rung
    return f"{head}-{task_label(rung, task)}" + ("-smoke" if smoke else "")


def experiment_dir(spec) -> Path:
    """``<out>/<rung or model>-<task>[-smoke]``: the folder :func:`toy_rl.experiments.load` reads."""
    return Path(spec.out) / experiment_name(spec.rung, spec.task, spec.model, spec.smoke)


def scenario_of(spec) -> str:
    return scenario_name(spec.rl.staleness, spec.rl.mode, spec.rl.partial)


def run_dir(spec) -> Path:
    """The folder of one run: ``spec.run_dir`` if set, else
    ``<out>/<rung or model>-<task>[-smoke]/<scenario>/<rule>/seed<k>``."""
    if spec.run_dir is not None:
        return Path(spec.run_dir)
    return experiment_dir(spec) / scenario_of(spec) / rule_label(spec.rl.rule) / f"seed{spec.rl.seed}"


def seed_of(folder) -> int | None:
    """The seed of a ``seed<k>`` folder, else None."""
    name = Path(folder).name
    return int(name[4:]) if name.startswith("seed") and name[4:].isdigit() else None
