"""The pilot gate (docs/protocol.md §2): a short symmetric + BAPO run on a preset, before comparing rules.

    from toy_rl.arithmetic.pilot import pilot
    p = pilot("long-failures", steps=30, seeds=(0,))
    p["regime"], p["rho_before_q50"], p["search_moved_frac"], p["c_high_mean"]

The loop logs, for every update and whichever rule trained
(:func:`toy_rl.rl.diagnostics.balance_at_start`), λ as ``lambda_mass``
(Σ_wrong |A|·L / Σ_right A·L: on-policy the token-mean loss has ρ = 1 / (1 + λ)
exactly, protocol §1), the plain token count ratio ``lambda_tokens``, and ρ at
BAPO's starting bounds [0.6, 1.2] under both readings of which tokens count
(``rho_start_grad``, ``rho_start_all``; docs/paper_vs_code.md). For a BAPO run
``rho_start_grad`` is the ``rho_before`` its search started from.

:func:`summarise` turns per-update records into the gate's numbers and names the
regime; it is a pure function of the records (no model, no files).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from ..clipping import BAPO
from ..rl.config import rule_label
from ..rl.loop import train
from .policy import TinyPolicy
from .presets import Preset, get_preset
from .run import scenario_name, set_cpu_threads
from .warmstart import cache_path, load_warmstart

RHO0 = BAPO().rho0
START = (BAPO().low_range[0], BAPO().high_range[0])      # BAPO's starting bounds (a⁻, a⁺)
END = (BAPO().low_range[1], BAPO().high_range[1])        # where its search path ends (b⁻, b⁺)


def run_preset(preset: Preset | str, rule="bapo", seed: int = 0, out="runs/arithmetic-presets",
               device="auto", progress: bool = False, **overrides) -> list[dict]:
    """One RL run of a preset from its warm start, through the shared loop; returns its records.
    ``rule``: a name or a rule object (e.g. ``FixedBounds(lo=0.9, hi=3.0)``).

    What ``toy_rl.arithmetic.run.run_one`` does, with the preset's task settings and generation budget
    (run_one fixes max_new_tokens to the task's longest answer + 1 and takes only a task name).
    Runs live in ``<out>/<preset>/<scenario>/<rule>/seed<k>/`` and resume if interrupted.
    """
    preset = get_preset(preset) if isinstance(preset, str) else preset
    task = preset.make_task()
    policy = TinyPolicy(load_warmstart(task, preset.warmstart, device=device, progress=progress))
    cfg = preset.rl_config(rule, seed, **overrides)
    scenario = scenario_name(cfg.staleness, cfg.mode, cfg.partial)
    return train(cfg, policy, task, Path(out) / preset.name / scenario / rule_label(rule) / f"seed{seed}",
                 progress=progress)


def pilot(preset_name: str | Preset, steps: int = 30, seeds=(0,), rules=("symmetric", "bapo"), out=None,
          threads: int | None = 1, device="auto", progress: bool = False, gate_rule: str = "bapo",
          **overrides) -> dict:
    """The pilot gate on a preset: each rule × seed for ``steps`` updates, then :func:`summarise`.

    Held-out accuracy is measured at the start and the end only (unless ``eval_every`` is overridden).
    ``rules``: names or rule objects; ``records`` and ``by_rule`` are keyed by their labels
    (:func:`toy_rl.rl.config.rule_label`); ``gate_rule`` is the label whose records the gate reads.
    ``out``: where the runs are kept (None: a temporary folder). Returns the summary plus ``records``, ``seconds`` (the whole pilot),
    ``warmstart_seconds`` and ``warmstart_cached`` (whether the warm start was already on disk).
    """
    preset = get_preset(preset_name) if isinstance(preset_name, str) else preset_name
    set_cpu_threads(threads)
    overrides = {"steps": steps, "eval_every": steps, "checkpoint_every": steps, **overrides}
    t0 = time.perf_counter()
    cached = cache_path(preset.make_task(), preset.warmstart).exists()
    load_warmstart(preset.make_task(), preset.warmstart, device=device, progress=progress)
    warm_seconds = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        records = {rule_label(rule): [run_preset(preset, rule, seed, out or tmp, device, progress, **overrides)
                                      for seed in seeds] for rule in rules}
    result = summarise(records, gate_rule)
    result.update(preset=preset.name, steps=steps, seeds=list(seeds), records=records,
                  seconds=time.perf_counter() - t0, warmstart_seconds=warm_seconds, warmstart_cached=cached)
    return result


# --- the summary: pure functions of per-update records ---------------------------------------------------

def _updates(runs: list[list[dict]]) -> list[list[dict]]:
    """Each seed's update records (those that trained on a batch), final record left out."""
    return [[r for r in recs if not r.get("final") and "loss" in r] for recs in runs]


def _values(updates: list[list[dict]], key: str) -> np.ndarray:
    return np.array([r[key] for recs in updates for r in recs if r.get(key) is not None], dtype=float)


def _quantiles(values: np.ndarray, key: str) -> dict:
    qs = np.quantile(values, (0.1, 0.5, 0.9)) if values.size else [float("nan")] * 3
    return {f"{key}_q10": float(qs[0]), f"{key}_q50": float(qs[1]), f"{key}_q90": float(qs[2])}


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


def batch_lambda(record: dict) -> float | None:
    """λ of one update: ``lambda_mass`` if the loop logged it (None: no advantage mass at all), else, for
    records from before it did, len_wrong / len_correct (exact for one group)."""
    if "lambda_mass" in record:
        return record["lambda_mass"]
    if record.get("len_wrong") and record.get("len_correct"):
        return record["len_wrong"] / record["len_correct"]
    return None


def moved(record: dict, start=START) -> bool:
    """Whether BAPO's bounds left its start in this update."""
    if record.get("search_steps") is not None:
        return record["search_steps"] > 0
    return not (np.isclose(record["c_low"], start[0]) and np.isclose(record["c_high"], start[1]))


def classify_regime(rho_before: np.ndarray, rho0: float = RHO0) -> str:
    """"negatives-dominate" if ρ before the search is below ρ0 in a majority of updates, else "balanced"."""
    rho_before = np.asarray(rho_before, dtype=float)
    if rho_before.size == 0:
        raise ValueError("rho_before is empty: the gate needs the per-update ρ before BAPO's search")
    return "negatives-dominate" if np.mean(rho_before < rho0) > 0.5 else "balanced"


def rule_summary(runs: list[list[dict]]) -> dict:
    """One rule's diagnostics over its seeds: λ, ρ, clip fractions, KL, accuracy and reward at start and end."""
    updates = _updates(runs)
    lam = np.array([v for recs in updates for r in recs if (v := batch_lambda(r)) is not None], dtype=float)
    lam = lam[np.isfinite(lam)]
    out = {"updates": sum(map(len, updates)), "lambda": _mean(lam), **_quantiles(lam, "lambda")}
    for key in ("lambda_tokens", "rho", "clip_frac_low", "clip_frac_high", "clip_frac", "approx_kl", "entropy",
                "rho_start_grad", "rho_start_all", "len_correct", "len_wrong"):
        out[key] = _mean(_values(updates, key))
    first = [recs[0]["accuracy"] for recs in runs if recs and recs[0].get("accuracy") is not None]
    last = [recs[-1]["accuracy"] for recs in runs if recs and recs[-1].get("final")]
    out["accuracy_start"], out["accuracy_end"] = _mean(np.array(first)), _mean(np.array(last))
    k = max(1, min(5, min((len(u) for u in updates), default=1) // 4))
    out["reward_start"] = _mean(np.array([r["reward_mean"] for u in updates for r in u[:k]]))
    out["reward_end"] = _mean(np.array([r["reward_mean"] for u in updates for r in u[-k:]]))
    out["seconds"] = float(sum(r.get("seconds", 0.0) for recs in runs for r in recs))
    return out


def gate(runs: list[list[dict]], rho0: float = RHO0, start=START) -> dict:
    """The gate's numbers from a BAPO run's records: ρ before the search, how often and how far it moved,
    how often it reached ρ0 and how often it stopped at the end of its path [b⁻, b⁺] (then it acted as
    that fixed rule)."""
    updates = _updates(runs)
    rho_before = _values(updates, "rho_before")
    flags = [[moved(r, start) for r in u] for u in updates]
    half = lambda part: _mean(np.array([f for u in flags for f in (u[:len(u) // 2] if part == 0 else u[len(u) // 2:])],
                                       dtype=float))
    c_high = _values(updates, "c_high")
    return {"regime": classify_regime(rho_before, rho0), "rho0": rho0,
            "rho_before_below_rho0": _mean((rho_before < rho0).astype(float)), **_quantiles(rho_before, "rho_before"),
            **_quantiles(_values(updates, "rho_start_all"), "rho_before_all"),
            "search_moved_frac": _mean(np.array([f for u in flags for f in u], dtype=float)),
            "search_moved_frac_early": half(0), "search_moved_frac_late": half(1),
            "c_low_mean": _mean(_values(updates, "c_low")), "c_high_mean": _mean(c_high), **_quantiles(c_high, "c_high"),
            "rho_reached_frac": _mean(_values(updates, "rho_reached")),
            "bounds_at_end_frac": _mean(np.array([np.isclose(r["c_low"], END[0]) and np.isclose(r["c_high"], END[1])
                                                  for u in updates for r in u], dtype=float))}


def summarise(records: dict, gate_rule: str = "bapo", rho0: float = RHO0) -> dict:
    """{rule: [records of each seed]} -> the gate (from ``gate_rule``), that rule's diagnostics at the top
    level (λ, clip fractions, KL, accuracy...), and every rule's under ``by_rule``."""
    if gate_rule not in records:
        raise ValueError(f"gate_rule {gate_rule!r} has no records; rules given: {sorted(records)}")
    by_rule = {rule: rule_summary(runs) for rule, runs in records.items()}
    return {**by_rule[gate_rule], **gate(records[gate_rule], rho0), "by_rule": by_rule}
