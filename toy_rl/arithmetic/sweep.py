"""The rung-2 sweep a notebook reads: the finished runs under ``runs/`` if they are complete, else a smaller sweep
run now through the one runner (:func:`toy_rl.experiments.sweep`, which resumes, so a second call only loads)."""
from __future__ import annotations

from pathlib import Path

from ..experiments import experiment_name, grid, load, scenario_name, sweep
from .run import DEFAULTS, RULES


def scenario_names(stalenesses=(0,), mode: str = "reuse", partial: int | None = None) -> list[str]:
    """The scenario folders :func:`toy_rl.experiments.grid` lays out for these settings, in its order."""
    return [scenario_name(k, mode) for k in stalenesses] + ([scenario_name(0, partial=partial)] if partial else [])


def finished(runs: list[list[dict]]) -> list[list[dict]]:
    """The runs whose log ends with the ``final`` record (a run still in progress has none)."""
    return [recs for recs in runs if recs and recs[-1].get("final")]


def load_or_compare(root, task: str, stalenesses=(0,), partial: int | None = None, rules=RULES, seeds: int = 3,
                    mode: str = "reuse", quick_out=None, progress: bool = True, on_policy_rules=None, **overrides):
    """The runs of every (scenario, rule) with at least ``seeds`` finished seeds.

    Loads ``<root>/arithmetic-<task>/`` (``-smoke`` added with ``smoke=True``; what ``toy-rl arithmetic``
    writes) when every (scenario, rule) has ``seeds`` finished runs there (all finished seeds are used, in
    seed order). Otherwise runs :func:`toy_rl.experiments.sweep` of :func:`toy_rl.experiments.grid` into
    ``quick_out`` with ``overrides`` (smoke, steps, prompts, warmstart, ...); it resumes, so a second call only
    loads. ``on_policy_rules``: the rules needed on-policy, where
    every rule gives the same run (default: all of ``rules``). Returns ``(results, source)``: results
    ``{(scenario, rule): [records of each seed]}`` in scenario-then-rule order, source a line saying
    where they came from.
    """
    on_rules = tuple(on_policy_rules or rules)
    wanted = [(s, r) for s in scenario_names(stalenesses, mode, partial)
              for r in (on_rules if s == "on-policy" else rules)]
    where = Path(root) / experiment_name("arithmetic", task, smoke=overrides.get("smoke", False))
    if where.is_dir():
        loaded = load(where)
        runs = {key: finished(loaded.get(key, [])) for key in wanted}
        if all(len(v) >= seeds for v in runs.values()):
            n = sorted({len(v) for v in runs.values()})
            return runs, f"loaded from {where} ({'/'.join(map(str, n))} finished seeds per rule and scenario)"
    if quick_out is None:
        raise FileNotFoundError(f"{where} does not hold {seeds} finished seeds of every {wanted}; "
                                "pass quick_out to run them")
    res = {}
    if 0 in stalenesses:
        res.update(sweep(grid("arithmetic", task, on_rules, (0,), range(seeds), mode, out=quick_out, progress=progress,
                              **overrides)))
    rest = tuple(k for k in stalenesses if k != 0)
    if rest or partial is not None:
        res.update(sweep(grid("arithmetic", task, rules, rest, range(seeds), mode, partial, out=quick_out,
                              progress=progress, **overrides)))
    steps = overrides.get("steps", DEFAULTS["steps"])
    return ({key: res[key] for key in wanted},
            f"computed now into {Path(quick_out) / where.name} ({seeds} seeds, {steps} steps each; "
            f"the full sweep: see the README)")
