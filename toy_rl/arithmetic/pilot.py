"""The pilot gate on rung 2 (docs/protocol.md §2): a short symmetric + BAPO run on a preset, before comparing rules.

    from toy_rl.arithmetic.pilot import pilot
    p = pilot("long-failures", steps=30, seeds=(0,))
    p["regime"], p["rho_before"]["q50"], p["search_moved_frac"], p["c_high_mean"]

Both rules run through the one runner (:mod:`toy_rl.experiments`; resumable run folders
``<out>/<preset>/<scenario>/<rule>/seed<k>``). The loop logs, for every update and whichever rule
trained (:func:`toy_rl.rl.diagnostics.balance_at_start`), λ as ``lambda_mass`` (Σ_wrong |A|·L /
Σ_right A·L: on-policy the token-mean loss has ρ = 1 / (1 + λ) exactly, protocol §1) and ρ at BAPO's
starting bounds under both readings of which tokens count (``rho_start_grad``, ``rho_start_all``).

:func:`summarise` is a pure function of per-update records: the shared gate
(:func:`toy_rl.experiments.pilot.summarise_records`) plus what rung 2 adds, how often BAPO reached
ρ0 or stopped at the end of its search path (:func:`search_outcome`) and each rule's accuracy and
reward at the start and the end (:func:`rule_summary`).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..clipping import BAPO
from ..experiments import finished, make_spec, run
from ..experiments.layout import scenario_of
from ..experiments.pilot import finite_mean, records_array, summarise_records
from ..experiments.plan import Plan
from ..rl.config import rule_label
from ..threads import cpu_threads
from ..timing import up_front
from .presets import DEFAULT, Preset, as_preset
from .warmstart import cache_path, load_warmstart

DEFAULT_PRESET = DEFAULT


def preset_spec(preset: Preset, rule="bapo", seed: int = 0, out="runs/pilot", device="auto",
                progress: bool = False, threads: int | None = 1, **overrides):
    """The :class:`toy_rl.experiments.RunSpec` of one run of a preset: its task and warm start, its RL settings,
    then ``overrides`` (any RLConfig field: steps, staleness, mode, ...). ``rule``: a name or a rule object.
    Its folder is ``<out>/<preset>/<scenario>/<rule>/seed<k>`` (presets may share a task)."""
    spec = make_spec("arithmetic", preset.make_task(), **{**preset.rl, **overrides}, rule=rule, seed=seed,
                     warmstart=preset.warmstart, out=out, device=device, progress=progress, threads=threads)
    return spec.replace(run_dir=Path(out) / preset.name / scenario_of(spec) / rule_label(rule) / f"seed{seed}")


def run_preset(preset: Preset, rule="bapo", seed: int = 0, **settings) -> list[dict]:
    """One RL run of a preset (finished runs are read back); returns its records. ``settings`` as
    :func:`preset_spec`."""
    return run(preset_spec(preset, rule, seed, **settings))


def pilot(preset_name: str | Preset = DEFAULT_PRESET, steps: int = 30, seeds=(0,), out="runs/pilot",
          threads: int | None = 1, device="auto", progress: bool = False, **overrides) -> dict:
    """The pilot gate on a preset: symmetric and BAPO (its defaults) for ``steps`` updates on each seed.

    Held-out accuracy is measured at the start and the end only (unless ``eval_every`` is overridden);
    ``overrides``: RLConfig fields (staleness, mode, ...). Returns :func:`summarise` plus ``records``
    ({rule label: [records of each seed]}), ``seconds`` (the whole pilot), ``warmstart_seconds`` and
    ``warmstart_cached`` (whether the warm start was on disk before), ``preset``, ``steps``, ``seeds``.
    """
    preset = as_preset(preset_name)
    overrides = {"eval_every": steps, "checkpoint_every": steps, **overrides, "steps": steps}
    t0 = time.perf_counter()
    task = preset.make_task()
    cached = cache_path(task, preset.warmstart).exists()
    rules = ("symmetric", BAPO())
    todo = [spec for rule in rules for seed in seeds
            if finished(spec := preset_spec(preset, rule, seed, out=out, device=device, **overrides)) is None]
    with up_front(Plan(specs=todo, warmstarts=[(task, preset.warmstart)])):    # one line first if it is long
        with cpu_threads(threads):
            load_warmstart(task, preset.warmstart, device=device, progress=progress)
        warm_seconds = time.perf_counter() - t0
        records = {rule_label(rule): [run_preset(preset, rule, seed, out=out, device=device, progress=progress,
                                                 threads=threads, **overrides) for seed in seeds] for rule in rules}
    result = summarise(records)
    result.update(preset=preset.name, steps=steps, seeds=list(seeds), records=records,
                  seconds=time.perf_counter() - t0, warmstart_seconds=warm_seconds, warmstart_cached=cached)
    return result


# --- the summary: pure functions of per-update records ---------------------------------------------------

def search_outcome(bapo_runs: list[list[dict]], bapo: BAPO = BAPO()) -> dict:
    """How BAPO's searches ended: ``rho_reached_frac`` (ρ ≥ ρ0 at the chosen bounds) and ``bounds_at_end_frac``
    (the search ran to the end of its path, [b⁻, b⁺]: that update used the fixed rule [b⁻, b⁺])."""
    lo, hi = records_array(bapo_runs, "c_low"), records_array(bapo_runs, "c_high")
    seen = np.isfinite(lo)
    at_end = (np.abs(lo - bapo.low_range[1]) < 1e-6) & (np.abs(hi - bapo.high_range[1]) < 1e-6)
    return {"rho_reached_frac": finite_mean(records_array(bapo_runs, "rho_reached")),
            "bounds_at_end_frac": float(at_end[seen].mean()) if seen.any() else float("nan")}


def rule_summary(runs: list[list[dict]], first: int = 5) -> dict:
    """One rule over its seeds: held-out accuracy at the start and the end, mean reward over the ``first``
    and the last updates, and the per-update means of λ, answer lengths, clip fractions, KL and entropy."""
    out = {key: finite_mean(records_array(runs, key)) for key in (
        "lambda_mass", "len_correct", "len_wrong", "clip_frac_low", "clip_frac_high", "clip_frac", "approx_kl",
        "entropy", "rho_start_grad")}
    reward = records_array(runs, "reward_mean")
    out["reward_start"] = finite_mean(reward[:, :first])
    out["reward_end"] = finite_mean(np.concatenate([row[np.isfinite(row)][-first:] for row in reward] or [[]]))
    out["accuracy_start"] = finite_mean([recs[0].get("accuracy", np.nan) for recs in runs if recs])
    out["accuracy_end"] = finite_mean([recs[-1]["accuracy"] for recs in runs if recs and recs[-1].get("final")])
    out["seconds"] = float(sum(r.get("seconds", 0.0) for recs in runs for r in recs))
    return out


def summarise(records: dict, gate_rule: str = "bapo", symmetric: str = "symmetric") -> dict:
    """{rule label: [records of each seed]} -> the shared gate on ``gate_rule`` (regime, λ, ρ before the search,
    search_moved_frac, bounds, clip fractions, KL; the symmetric run's under "symmetric"), BAPO's
    :func:`search_outcome`, its accuracy at the start and the end, and every rule's :func:`rule_summary`
    under ``by_rule``."""
    if gate_rule not in records:
        raise ValueError(f"gate_rule {gate_rule!r} has no records; rules given: {sorted(records)}")
    out = summarise_records(records[gate_rule], records.get(symmetric))
    by_rule = {rule: rule_summary(runs) for rule, runs in records.items()}
    out.update(search_outcome(records[gate_rule]), by_rule=by_rule,
               accuracy_start=by_rule[gate_rule]["accuracy_start"], accuracy_end=by_rule[gate_rule]["accuracy_end"])
    return out
