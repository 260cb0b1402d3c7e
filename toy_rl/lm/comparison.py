"""Rung 3's default comparison: the three rules and the protocol's controls on a LoRA task, tested by seed.

    from toy_rl.lm.comparison import compare
    result = compare("search-warm", seeds=range(10), staleness=2, steps=40, device="cuda")
    print(format_rows(result["rows"])); print(gate_line(result))

The same design as rung 2's (:mod:`toy_rl.arithmetic.comparison`, docs/protocol.md §3-6): every rule of
:func:`toy_rl.experiments.controls.control_rules` in one staleness cell, then the fixed rule at BAPO's realised mean
bounds; seed k of every rule starts from the same model (and the task's LoRA warm start, committed in
results/warm-starts/) and draws the same first rollout, so the tests pair runs by seed
(:func:`shared_first_rollouts` checks it from the logs). Endpoints, declared before running: ``auc_accuracy``
(primary: held-out accuracy averaged over training) and ``final_accuracy`` (reported); claims 5 and 6 judged on the
primary one as rung 2's (:func:`~toy_rl.arithmetic.comparison.comparison_checks`, whose Holm family gives the
table's p_holm too), in one cell of the step-size grid of docs/protocol.md §7a only (:func:`comparison_checks`: the
preset's step; its half and double, another ~40 hours of one CPU core, are not run), so no claim is called supported
or contradicted here across the grid.

Runs go through the one runner (``<out>/<model>-<task>/<scenario>/<rule>/seed<k>``, resumable), so the
comparison is made on a GPU (`toy-rl lora --task search-warm --controls --staleness 2 --seeds 10 --device cuda`)
and read back anywhere.
"""
from __future__ import annotations

from ..experiments.plan import Plan
from ..timing import up_front
from ..experiments import grid, status, sweep
from ..experiments.controls import MEAN_BOUNDS, control_rules, mean_bounds_rule
from ..experiments.layout import scenario_of
from ..experiments.runner import read_back
from ..experiments.compare import paired_seeds, reference_first
from ..arithmetic.comparison import REFERENCE, realised_bounds, run_all, summarised
from ..arithmetic.comparison import comparison_checks as rung2_checks
from ..verdicts import one_grid_cell, verdict_line

CELL = "the preset's step size; its half and double not run"


def comparison_checks(result: dict) -> list:
    """Rung 3's verdicts on claims 5 and 6: rung 2's (:func:`toy_rl.arithmetic.comparison.comparison_checks`), in
    the one cell of the step-size grid that ran (:func:`toy_rl.verdicts.one_grid_cell`)."""
    return one_grid_cell(rung2_checks(result), CELL)


def comparison_verdicts(result: dict) -> list[str]:
    """:func:`comparison_checks` as the lines notebooks and commands print."""
    return [verdict_line(v) for v in comparison_checks(result)]


FIRST_ROLLOUT = ("reward_mean", "len_correct", "len_wrong")   # what a step-0 record logs of the first batch


def shared_first_rollouts(result: dict) -> tuple[int, int]:
    """(seeds whose runs all drew the same first rollout, seeds run by two rules or more), from the runs' first
    records (the first batch's mean reward and answer lengths): the pairing by seed that the tests rely on, checked
    from the logs. Runs that started from different warm starts, or computed in bf16 on CPUs that round it
    differently (config.json's ``cpu_bf16``), draw other first rollouts from the same seed."""
    firsts: dict = {}                  # seed -> what each rule's run logged of its first rollout
    for seed_runs in result["runs"].values():
        for records in seed_runs:
            first = records[0]
            firsts.setdefault(first.get("seed"), []).append(repr(tuple(first.get(k) for k in FIRST_ROLLOUT)))
    several = [logged for logged in firsts.values() if len(logged) > 1]
    return sum(len(set(logged)) == 1 for logged in several), len(several)


def _specs(task, rules: dict, staleness: int, seeds, **settings) -> dict:
    return {label: grid("lm", task, rules=(rule,), stalenesses=(staleness,), seeds=seeds, **settings)
            for label, rule in rules.items()}


def _train_ahead(todo: list, workers: int) -> None:
    """With ``workers`` > 1, train the runs ``todo`` (still missing) that many at a time (fresh processes, each on
    its spec's threads), after making the task's LoRA warm start once here; the sweep then reads them back. They
    train seed by seed (seed 0 of every rule, then seed 1, ...): a comparison that lands a few runs a session has
    complete pairs to test as early as it can."""
    if workers > 1 and len(todo) > 1:
        from .run import make_warm_start
        make_warm_start(todo[0])
        run_all(sorted(todo, key=lambda s: s.rl.seed), workers, fresh=True)     # each run's memory freed with it


def compare(task="search-warm", seeds=range(10), staleness: int = 2, rules: dict | None = None, workers: int = 1,
            **settings) -> dict:
    """The rung-3 comparison (module docstring). ``workers``: runs at once (processes; 2 on a free 2-core CPU).
    ``settings``: what :func:`toy_rl.experiments.make_spec` takes
    (steps, mode, out, model, preset, device, smoke, progress, ...). Returns {"task", "seeds", "steps",
    "scenario", "rows" (BAPO the reference; p_holm from the verdicts' family), "gate" (BAPO's regime), "search", "mean_bounds",
    "seeds_for_3_points", "runs"}, as :func:`toy_rl.arithmetic.comparison.compare` does."""
    seeds = paired_seeds(seeds)
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    rules = control_rules() if rules is None else dict(rules)
    ordered = reference_first(rules, REFERENCE)
    specs = _specs(task, ordered, staleness, seeds, **settings)
    every = [s for group in specs.values() for s in group]
    todo = [s for s, done in zip(every, read_back(every)) if done is None]     # says which runs results/ holds
    plan = Plan(specs=todo + (specs[REFERENCE] if REFERENCE in specs else []), workers=workers)  # + mean bounds
    with up_front(plan):
        _train_ahead(todo, workers)
        runs = {label: next(iter(sweep(group, announce_logged=False).values())) for label, group in specs.items()}
        first = next(iter(specs.values()))[0]
        result = dict(task=str(task), seeds=seeds, steps=first.rl.steps, scenario=scenario_of(first))
        if REFERENCE in runs:
            lo, hi = realised_bounds(runs[REFERENCE])
            rules[MEAN_BOUNDS] = mean_bounds_rule(lo, hi)
            group = _specs(task, {MEAN_BOUNDS: rules[MEAN_BOUNDS]}, staleness, seeds, **settings)[MEAN_BOUNDS]
            _train_ahead([s for s in group if status(s) != "finished"], workers)
            runs[MEAN_BOUNDS] = next(iter(sweep(group).values()))
    return summarised(result, runs, rules)
