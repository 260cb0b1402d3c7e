"""The rung-2 sweep a notebook reads: the finished runs under ``runs/`` if they are complete, else a smaller sweep
run now through the one runner (:func:`toy_rl.experiments.sweep`, which resumes, so a second call only loads)."""
from __future__ import annotations

from pathlib import Path

from ..experiments import experiment_name, grid, load, scenario_name, status, sweep
from ..experiments.logged import announce, candidates
from ..experiments.plan import Plan
from ..experiments.runner import read_back, read_dir
from ..timing import up_front
from .run import DEFAULTS, RULES


def scenario_names(stalenesses=(0,), mode: str = "reuse", partial: int | None = None) -> list[str]:
    """The scenario folders :func:`toy_rl.experiments.grid` lays out for these settings, in its order."""
    return [scenario_name(k, mode) for k in stalenesses] + ([scenario_name(0, partial=partial)] if partial else [])


def finished(runs: list[list[dict]]) -> list[list[dict]]:
    """The runs whose log ends with the ``final`` record (a run still in progress has none)."""
    return [recs for recs in runs if recs and recs[-1].get("final")]


def _wanted(stalenesses, partial, rules, mode, on_policy_rules) -> list[tuple[str, str]]:
    on_rules = tuple(on_policy_rules or rules)
    return [(s, r) for s in scenario_names(stalenesses, mode, partial) for r in (on_rules if s == "on-policy" else rules)]


def _complete(root, task, wanted, seeds: int, smoke: bool):
    """(the finished runs of every wanted (scenario, rule) if each has ``seeds`` of them under the experiment's
    folder or its committed twin in results/ (:mod:`toy_rl.experiments.logged`), else None; that folder)."""
    home = Path(root) / experiment_name("arithmetic", task, smoke=smoke)
    for where in candidates(home):
        if where.is_dir():
            loaded = load(where)
            runs = {key: finished(loaded.get(key, [])) for key in wanted}
            if all(len(v) >= seeds for v in runs.values()):
                return runs, where
    return None, home


def quick_grids(task: str, stalenesses=(0,), partial: int | None = None, rules=RULES, seeds: int = 3,
                mode: str = "reuse", quick_out=None, progress: bool = True, on_policy_rules=None,
                **overrides) -> list[list]:
    """The specs :func:`load_or_sweep` sweeps when the logged runs are not complete: on-policy with
    ``on_policy_rules``, then the other stalenesses (and partial rollout) with ``rules``; one list per sweep."""
    on_rules = tuple(on_policy_rules or rules)
    grids = []
    if 0 in stalenesses:
        grids.append(grid("arithmetic", task, on_rules, (0,), range(seeds), mode, out=quick_out, progress=progress,
                          **overrides))
    rest = tuple(k for k in stalenesses if k != 0)
    if rest or partial is not None:
        grids.append(grid("arithmetic", task, rules, rest, range(seeds), mode, partial, out=quick_out,
                          progress=progress, **overrides))
    return grids


def missing_specs(root, task: str, stalenesses=(0,), partial: int | None = None, rules=RULES, seeds: int = 3,
                  mode: str = "reuse", quick_out=None, on_policy_rules=None, **overrides) -> list:
    """The runs :func:`load_or_sweep` with these arguments would train (none when ``root`` holds them all):
    for the estimate a command prints first (:mod:`toy_rl.timing`)."""
    wanted = _wanted(stalenesses, partial, rules, mode, on_policy_rules)
    if _complete(root, task, wanted, seeds, overrides.get("smoke", False))[0] is not None or quick_out is None:
        return []
    return [s for g in quick_grids(task, stalenesses, partial, rules, seeds, mode, quick_out, False, on_policy_rules,
                                   **overrides) for s in g if status(s) != "finished"]


def load_or_sweep(root, task: str, stalenesses=(0,), partial: int | None = None, rules=RULES, seeds: int = 3,
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
    wanted = _wanted(stalenesses, partial, rules, mode, on_policy_rules)
    runs, where = _complete(root, task, wanted, seeds, overrides.get("smoke", False))
    if runs is not None:
        n = sorted({len(v) for v in runs.values()})
        announce([where] * sum(map(len, runs.values())))
        return runs, f"loaded from {where} ({'/'.join(map(str, n))} finished seeds per rule and scenario)"
    if quick_out is None:
        raise FileNotFoundError(f"{where} does not hold {seeds} finished seeds of every {wanted}; "
                                "pass quick_out to run them")
    grids = quick_grids(task, stalenesses, partial, rules, seeds, mode, quick_out, progress, on_policy_rules,
                        **overrides)
    res = {}
    every = [s for g in grids for s in g]
    todo = [s for s, done in zip(every, read_back(every)) if done is None]     # says which runs results/ holds
    with up_front(Plan(specs=todo)):                  # one line for both sweeps, before the first
        for g in grids:
            res.update(sweep(g, announce_logged=False))
    steps = overrides.get("steps", DEFAULTS["steps"])
    verb = "computed now into" if todo else "loaded from the notebook's own sweep in"
    folder = Path(quick_out) / where.name if todo else read_dir(every[0]).parents[2]    # or its twin in results/
    return ({key: res[key] for key in wanted},
            f"{verb} {folder} ({seeds} seeds, {steps} steps each; the full sweep: see the README)")
