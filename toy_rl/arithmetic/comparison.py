"""Rung 2's default comparison: the three rules and the protocol's controls on a preset, tested by seed.

    from toy_rl.arithmetic.comparison import compare, format_rows
    result = compare("long-failures", seeds=range(10), steps=120, workers=2)
    print(format_rows(result["rows"]))

What runs (docs/protocol.md §3-6): every rule of :func:`toy_rl.experiments.controls.control_rules`
(or the few a preset names, :func:`preset_rules`) on the preset's one staleness cell (default "long-failures":
lag 8; "long-failures-partial": partial rollout), then the fixed rule at BAPO's
realised mean bounds over all seeds (:func:`realised_bounds`). Seed k of every rule starts from the
same warm start and draws the same first rollout, so the tests pair runs by seed.

Endpoints, declared before running, one number per seed: ``auc_accuracy`` (primary: greedy held-out
accuracy averaged over training, the area under its curve) and ``final_accuracy`` (after the last
update), both on the task's 1,000 held-out problems. Every rule is tested against BAPO (difference
BAPO − rule, :func:`toy_rl.stats.paired_test`); the p-values of the whole table are Holm-adjusted
together (:func:`toy_rl.stats.holm`). The result carries the pilot gate of BAPO's runs (``gate``:
:func:`toy_rl.experiments.pilot.summarise_records`), so the table states its regime.

Runs go through the one runner (``<out>/<preset>/<scenario>/<rule>/seed<k>``, resumable): an
interrupted comparison is finished by calling it again. ``workers`` > 1 runs that many at once, each
in its own process on one thread.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..experiments.plan import Plan
from ..timing import up_front
from ..experiments import run
from ..experiments.runner import finished, read_back, read_dir
from ..experiments.layout import scenario_of
from ..experiments import compare as shared
from ..experiments.compare import band_columns, paired_columns, paired_seeds, reference_first, with_family_p
from ..experiments.controls import MEAN_BOUNDS, c_high_spread, control_claims, control_rules, mean_bounds_rule
from ..experiments.pilot import records_array, records_regime, summarise_records
from ..experiments.records import run_summary
from ..experiments.table import band_text, diff_text, p_text
from ..verdicts import judge, verdict_line
from ..workers import map_in_pool
from .pilot import preset_spec, search_outcome
from .presets import DEFAULT, Preset, as_preset
from .warmstart import load_warmstart

ENDPOINTS = ("auc_accuracy", "final_accuracy")      # the first is the primary endpoint
PRIMARY = ENDPOINTS[0]     # the one endpoint the claims are tested on (declared before the runs; it does not saturate)
REFERENCE = "bapo"


def preset_rules(preset: Preset) -> dict:
    """{label: rule} a preset's comparison runs when no rules are given: :func:`~toy_rl.experiments.controls.
    control_rules` (docs/protocol.md §3), or only those the preset names in ``Preset.rules`` (e.g.
    "long-failures-partial": symmetric, clip-higher and BAPO, Algorithm 1), in that order. The fixed rule at BAPO's
    realised mean bounds is added by :func:`compare` whenever BAPO is among them."""
    rules = control_rules()
    if preset.rules is None:
        return rules
    unknown = [r for r in preset.rules if r not in rules]
    if unknown:
        raise ValueError(f"preset {preset.name!r} names unknown rules {unknown}; choose from {', '.join(rules)}")
    return {label: rules[label] for label in preset.rules}


def _run(spec) -> list[dict]:
    return run(spec)


def run_all(specs: list, workers: int = 1, fresh: bool = False) -> list[list[dict]]:
    """The records of every spec, in order; ``workers`` > 1 runs them in that many processes (``fresh``: a new
    process for each run, :func:`toy_rl.workers.process_pool`)."""
    read_back(specs)                   # first a line for the runs read from the committed logs in results/
    if workers <= 1 or len(specs) <= 1:
        return [run(s) for s in specs]
    return map_in_pool(_run, specs, min(workers, len(specs)), fresh)


def _active(bapo_runs: list[list[dict]]):
    """(c_low, c_high, the updates where a bound could clip: ρ defined, i.e. the batch carried advantage mass)."""
    lo, hi = records_array(bapo_runs, "c_low"), records_array(bapo_runs, "c_high")
    return lo, hi, np.isfinite(records_array(bapo_runs, "rho_before")) & np.isfinite(lo)


def realised_bounds(bapo_runs: list[list[dict]]) -> tuple[float, float]:
    """BAPO's mean (c_low, c_high) over its seeds and the updates where ρ was defined (the batch carried
    advantage mass, so the bounds could clip): :func:`toy_rl.experiments.compare.realised_bounds`."""
    return shared.realised_bounds(*_active(bapo_runs))


def per_seed(runs: list[list[dict]]) -> dict:
    """{seed: {endpoint: value, c_low, c_high, clip_frac, approx_kl}} of one rule's runs."""
    out = {}
    for recs in runs:
        s = run_summary(recs)
        out[s["seed"]] = dict(auc_accuracy=s["auc_accuracy"], final_accuracy=s["final_accuracy"],
                              start_accuracy=s["start_accuracy"], c_low=s["c_low"], c_high=s["c_high"],
                              clip_frac_low=s["clip_frac_low"], clip_frac_high=s["clip_frac_high"],
                              approx_kl=s["approx_kl"])
    return out


def _nan(v):
    return np.nan if v is None else float(v)


def table_rows(runs: dict, rules: dict, reference: str = REFERENCE) -> list[dict]:
    """One row per rule: endpoint means with 95% bands, mean bounds, clip fractions and KL, and paired tests
    against ``reference`` (diff = reference − rule, p before Holm), pairs matched by seed id."""
    scores = {label: per_seed(r) for label, r in runs.items()}
    rows = []
    for label, by_seed in scores.items():
        seeds = sorted(by_seed)
        row = dict(rule=label, rule_repr=repr(rules[label]), seeds=len(seeds))
        for name in (*ENDPOINTS, "start_accuracy", "c_low", "c_high", "clip_frac_low", "clip_frac_high", "approx_kl"):
            row.update(band_columns(name, np.array([_nan(by_seed[s][name]) for s in seeds])))
        if label != reference and reference in scores:
            both = sorted(set(scores[reference]) & set(by_seed))                # pairs matched by seed id

            def values(side: dict) -> dict:
                return {name: [_nan(side[s][name]) for s in both] for name in ENDPOINTS}
            row.update(paired_columns(values(scores[reference]), values(by_seed), ENDPOINTS, sd=True))
        rows.append(row)
    return rows


def with_verdicts_p(result: dict) -> dict:
    """``result["rows"]`` with each test's p_holm taken from the rung's one Holm family (the verdicts of
    :func:`comparison_checks`), so the table and the verdicts print the same p_holm; returns ``result``."""
    with_family_p(result["rows"], comparison_checks(result), ENDPOINTS, REFERENCE)
    return result


def seeds_needed(rows: list, effect: float = 0.03, endpoint: str = PRIMARY) -> int | None:
    """Seeds a paired test needs to see ``effect`` on ``endpoint`` at this table's scatter
    (:func:`toy_rl.experiments.compare.seeds_needed`)."""
    return shared.seeds_needed(rows, effect, endpoint)


def compare(preset: Preset | str = DEFAULT, seeds=range(10), steps: int | None = None, rules: dict | None = None,
            out="runs/compare", workers: int = 1, device="auto", progress: bool = False, **overrides) -> dict:
    """The default rung-2 comparison (module docstring).

    Args:
        preset: a preset name (default "long-failures") or a :class:`~toy_rl.arithmetic.presets.Preset`.
        seeds: the seeds, shared by every rule (pairs for the tests).
        steps: updates per run (default: the preset's).
        rules: {label: rule}; default :func:`preset_rules` (all of
            :func:`~toy_rl.experiments.controls.control_rules` unless the preset names fewer), with the fixed rule
            at BAPO's mean added when "bapo" is among them.
        out: root of the run folders.  workers: runs at once (processes, one thread each).
        overrides: other RLConfig fields (eval_every, lr, ...).

    Returns {"preset", "seeds", "steps", "scenario" (the run folders' scenario: "lag-8", "partial-8"), "rows" (BAPO the reference; p_holm from the verdicts' family), "gate" (BAPO's pilot
    gate over these runs: the regime), "search" (how BAPO's searches ended), "mean_bounds" (BAPO's realised
    mean bounds), "seeds_for_3_points" (:func:`seeds_needed`)}.
    """
    preset = as_preset(preset)
    seeds = paired_seeds(seeds)
    if workers < 1:
        raise ValueError(f"workers must be >= 1; got {workers}")
    rules = preset_rules(preset) if rules is None else dict(rules)
    if steps is not None:
        overrides["steps"] = steps
    if "eval_every" not in overrides and steps is not None:
        overrides["eval_every"] = max(1, steps // 6)

    def specs(label_rules: dict) -> list:
        return [preset_spec(preset, rule, seed, out=out, device=device, progress=progress, **overrides)
                for rule in label_rules.values() for seed in seeds]

    todo = missing_specs(preset, seeds, out, rules, device=device, **overrides)
    plan = Plan(specs=todo, warmstarts=[(preset.make_task(), preset.warmstart)] if todo else [], workers=workers)
    with up_front(plan):                      # one line first when the runs still to train take long
        if plan.specs:                        # the warm start, before the workers, only if a run will train
            load_warmstart(preset.make_task(), preset.warmstart, device=device, progress=progress)
        ordered = reference_first(rules, REFERENCE)
        records = run_all(specs(ordered), workers)
        runs = {label: records[i * len(seeds):(i + 1) * len(seeds)] for i, label in enumerate(ordered)}
        result = dict(preset=preset.name, seeds=seeds, steps=steps or preset.rl.get("steps"),
                      scenario=scenario_of(preset_spec(preset, "symmetric", seeds[0], out=out, **overrides)))
        if REFERENCE in runs:
            rules[MEAN_BOUNDS] = mean_bounds_rule(*realised_bounds(runs[REFERENCE]))
            runs[MEAN_BOUNDS] = run_all(specs({MEAN_BOUNDS: rules[MEAN_BOUNDS]}), workers)
    return summarised(result, runs, rules)


def summarised(result: dict, runs: dict, rules: dict) -> dict:
    """``result`` with the regime of BAPO's runs (``gate``, ``search``, ``mean_bounds``), the table rows (p_holm from
    the verdicts' family), the seeds a paired test needs and the runs: the end of every rung-2 and rung-3 comparison,
    run now (:func:`compare`, :func:`toy_rl.lm.comparison.compare`) or read back (:func:`from_logs`)."""
    if REFERENCE in runs:
        result.update(gate=summarise_records(runs[REFERENCE], runs.get("symmetric")),
                      search=search_outcome(runs[REFERENCE]), mean_bounds=list(realised_bounds(runs[REFERENCE])))
    rows = table_rows(runs, rules)
    result.update(rows=rows, seeds_for_3_points=seeds_needed(rows), runs=runs)
    return with_verdicts_p(result)


def from_logs(folder) -> dict:
    """A comparison read back from its logged runs alone (``results/compare/<preset>``: config.json and
    metrics.jsonl per run; no warm start, nothing trained): the same keys as :func:`compare` but ``steps`` (the
    runs' own). Rule folders are named by :func:`~toy_rl.rules.rule_label`; the one folder no control rule names
    is the fixed rule at BAPO's mean bounds. Runs that started from different LoRA warm starts are refused
    (:func:`~toy_rl.experiments.logged.check_one_warm_start`)."""
    from ..experiments.logged import check_one_warm_start
    from ..experiments.runner import load
    from ..rl.config import rule_label
    folder = Path(folder)
    labels = {rule_label(rule): (label, rule) for label, rule in control_rules().items()}
    check_one_warm_start(folder)
    logged = load(folder)
    scenarios = sorted({scenario for scenario, _ in logged})
    if len(scenarios) != 1:
        raise ValueError(f"{folder} should hold one comparison (one scenario); it holds {scenarios or 'no runs'}")
    runs, rules = {}, {}
    for (_, name), records in logged.items():
        label, rule = labels.get(name, (MEAN_BOUNDS, None))
        if label in runs:
            raise ValueError(f"{folder}: more than one rule folder no control rule names ({name})")
        runs[label], rules[label] = records, rule
    if MEAN_BOUNDS in runs and REFERENCE in runs:
        rules[MEAN_BOUNDS] = mean_bounds_rule(*realised_bounds(runs[REFERENCE]))
    seeds = sorted({recs[0]["seed"] for seed_runs in runs.values() for recs in seed_runs})
    order = [REFERENCE, *control_rules(), MEAN_BOUNDS]                   # as compare orders them
    ordered = dict(sorted(runs.items(), key=lambda kv: order.index(kv[0])))
    return summarised(dict(preset=folder.name, seeds=seeds, scenario=scenarios[0]), ordered, rules)


def as_cells(result: dict) -> dict:
    """The comparison's runs keyed ``{(scenario, rule label): [records per seed]}``, as the rung-2 sweeps key theirs
    (:func:`toy_rl.arithmetic.sweep.load_or_sweep`), so the sweeps' measures and views read them too
    (:func:`~toy_rl.arithmetic.measures.stats_table`: staleness_mean/max, mixed_versions, clip fractions;
    :func:`~toy_rl.arithmetic.views.partial_curves`, :func:`~toy_rl.arithmetic.views.rule_bands`). The scenario is
    the preset's one staleness cell, e.g. "partial-8" (partial rollout, docs/protocol.md §4)."""
    return {(result["scenario"], label): runs for label, runs in result["runs"].items()}


def comparison_checks(result: dict, endpoints=(PRIMARY,)) -> list:
    """The verdicts this comparison can give: claims 5 and 6 of
    :func:`~toy_rl.experiments.controls.control_claims` on the primary endpoint, paired by seed, Holm across
    both (:func:`toy_rl.verdicts.judge`: the rung's one family), a difference under 1 point counting neither way;
    claim 6 only if BAPO's c_high varied (SD > 0.1 over its updates). Both carry the regime of BAPO's runs; in a
    balanced one BAPO is named as the fixed rule it ran as."""
    runs = result["runs"]
    bapo_runs = runs.get(REFERENCE, [])
    regime = records_regime(bapo_runs) if bapo_runs else None
    spread = {"": c_high_spread(*_active(bapo_runs)[1:])} if bapo_runs else None
    scores = {label: per_seed(r) for label, r in runs.items()}
    return judge(control_claims({"": scores}, endpoints, regime, scale=100, unit=" points", c_high_sd=spread))


def comparison_verdicts(result: dict) -> list[str]:
    """:func:`comparison_checks` as the lines notebooks and reports print."""
    return [verdict_line(v) for v in comparison_checks(result)]


def missing_specs(preset: Preset, seeds=range(10), out="runs/compare", rules: dict | None = None,
                  steps: int | None = None, **overrides) -> list:
    """The specs of the runs :func:`compare` would train with these settings (not finished under ``out``); the
    runs of the fixed rule at BAPO's mean bounds count as BAPO's own specs while BAPO's runs are not all done
    (their bounds are not known yet). For the estimate a command prints first (:mod:`toy_rl.timing`)."""
    rules = preset_rules(preset) if rules is None else dict(rules)
    if steps is not None:
        overrides.setdefault("steps", steps)
        overrides.setdefault("eval_every", max(1, steps // 6))
    spec = {label: [preset_spec(preset, rule, s, out=out, **overrides) for s in seeds] for label, rule in rules.items()}
    done = {label: [finished(sp) for sp in specs] for label, specs in spec.items()}
    todo = [sp for label in spec for sp, d in zip(spec[label], done[label]) if d is None]
    if REFERENCE in rules and MEAN_BOUNDS not in rules:
        if any(d is None for d in done[REFERENCE]):
            todo += spec[REFERENCE]
        else:
            rule = mean_bounds_rule(*realised_bounds(done[REFERENCE]))
            todo += [sp for sp in (preset_spec(preset, rule, s, out=out, **overrides) for s in seeds)
                     if finished(sp) is None]
    return todo


def is_complete(preset: Preset, seeds=range(10), out="runs/compare", rules: dict | None = None,
                **overrides) -> bool:
    """Whether ``out`` holds every run of :func:`compare` with these settings finished (so compare only reads)."""
    rules = preset_rules(preset) if rules is None else dict(rules)
    done = {label: [finished(preset_spec(preset, rule, s, out=out, **overrides)) for s in seeds]
            for label, rule in rules.items()}
    if any(r is None for runs in done.values() for r in runs):
        return False
    if REFERENCE not in done:
        return True
    rule = mean_bounds_rule(*realised_bounds(done[REFERENCE]))
    return all(finished(preset_spec(preset, rule, s, out=out, **overrides)) is not None for s in seeds)


def load_comparison(preset: Preset | str = DEFAULT, seeds=range(10), out="runs/compare", quick_seeds=range(3),
                    quick_steps: int = 60, quick_out="runs/compare-notebook", **kw) -> tuple[dict, str]:
    """The full comparison if ``out`` holds all of it (read back, nothing trained), else a smaller one run now
    (``quick_seeds`` × ``quick_steps`` into ``quick_out``; resumable). Returns (result, a line saying which)."""
    preset = as_preset(preset)
    if is_complete(preset, seeds, out):
        folder = read_dir(preset_spec(preset, "symmetric", list(seeds)[0], out=out)).parents[2]   # or its twin
        return compare(preset, seeds, out=out, **kw), (f"loaded from {folder} ({len(list(seeds))} seeds, "
                                                       f"{preset.rl.get('steps')} updates each)")
    result = compare(preset, quick_seeds, steps=quick_steps, out=quick_out, **kw)
    return result, (f"{out}/{preset.name} is not complete: computed now into {quick_out}/{preset.name} "
                    f"({len(list(quick_seeds))} seeds, {quick_steps} updates each; the full comparison: "
                    f"toy-rl arithmetic --compare {preset.name} --seeds {len(list(seeds))} --workers 2)")




def format_rows(rows: list) -> str:
    """A fixed-width table: the primary endpoint (accuracy averaged over training, ± 95% half-width), BAPO − rule
    on it with its interval and its p_holm from the verdicts' family ("n/a": a control no claim tests), the final
    accuracy (reported), the mean bounds, the clip fractions and the KL per update."""
    head = ["rule", "auc acc", "BAPO − rule [95% CI]", "p_holm", "final acc", "bounds", "clip lo/hi", "KL"]
    lines = [head]
    for r in rows:
        lines.append([r["rule"], band_text(r, PRIMARY), diff_text(r, PRIMARY),
                      p_text(r[f"p_holm_{PRIMARY}"]) if f"diff_{PRIMARY}" in r else "", band_text(r, "final_accuracy"),
                      f"[{r['c_low']:.2f}, {r['c_high']:.2f}]",
                      f"{100 * r['clip_frac_low']:.1f}/{100 * r['clip_frac_high']:.1f}%", f"{r['approx_kl']:.4f}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def _fmt(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.2f}"


def gate_line(result: dict) -> str:
    """One line naming the regime the comparison ran in, from BAPO's own runs."""
    g = result.get("gate")
    if not g:
        return "regime: not measured (BAPO was not among the rules)"
    line = (f"regime: {g['regime']} (BAPO's runs: ρ before the search below ρ0 in {100 * g['rho_below_target_frac']:.0f}% "
            f"of updates, bounds moved in {100 * g['search_moved_frac']:.0f}%, mean [{g['c_low_mean']:.2f}, "
            f"{g['c_high_mean']:.2f}], λ median {_fmt(g.get('lambda', {}).get('q50'))})")
    if g["regime"] == "balanced":
        line += " — BAPO acted as the fixed rule [0.6, 1.2] here"
    return line


__all__ = ["ENDPOINTS", "PRIMARY", "as_cells", "compare", "format_rows", "from_logs", "gate_line", "load_comparison",
           "preset_rules", "realised_bounds", "run_all", "seeds_needed", "summarised", "table_rows"]
