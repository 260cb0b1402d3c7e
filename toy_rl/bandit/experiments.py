"""Experiments over staleness × rule × seeds: curves with 95% bands, a summary table, significance tests;
and rung 1's backend for the one runner (:mod:`toy_rl.experiments`).

    results = sweep(BanditConfig(), stalenesses=(0, 2, 4, 8), rules=RULES, seeds=range(20))
    rows = summary_table(results)         # one row per (staleness, rule): rung 1's per-seed statistics
    print(format_table(rows))             # toy_rl.experiments.format_table, the table of every rung
    mean, lo, hi = confidence_band(results[4, "bapo"].curve("entropy"))
    print(format_table(summarize(as_results(results))))    # the summary every rung shares (paired tests)

Bands are Student-t 95% intervals over seeds (scipy.stats.t): mean ± t_{0.975, n−1}·s/√n.
:func:`summary_table` compares rules with Welch's t-test (scipy.stats.ttest_ind, equal_var=False)
against the symmetric rule at the same staleness, seed by seed values as samples.

Through the runner (``make_spec("bandit", ...)``, ``grid("bandit", ...)``), a (scenario, rule) cell still runs
all its seeds side by side in one :func:`simulate` (:func:`train_seeds`); each seed's records
(:func:`seed_records`: the RL loop's vocabulary, the exact expected reward as the score) go to
``<out>/bandit-<preset>/<scenario>/<rule>/seed<k>/metrics.jsonl``.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ..clipping import ClipHigher
from ..rl.config import RLConfig
from ..experiments.layout import rule_label, scenario_name
from ..experiments.spec import RULES
from ..experiments.table import format_table  # noqa: F401  (re-exported: the one table format of every rung)
from ..rl.logbook import Logbook, read_jsonl
from ..rl.run_folder import lock_run, write_text
from ..stats import confidence_band, welch_test
from .config import BanditConfig
from .rewards import make_task
from .simulate import BanditRun, check_seeds, simulate

STALENESSES = (0, 2, 4, 8)
N_SEEDS = 20
CURVE_METRICS = ("entropy", "expected_reward", "sample_reward", "entropy_change", "rho", "rho_before",
                 "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm", "ratio_std",
                 "neg_adv_frac", "approx_kl")
TESTED = ("final_entropy", "final_reward", "mean_reward")    # compared against the baseline rule


def per_seed_summary(run: BanditRun) -> dict:
    """One number per seed for every summary quantity: {name: (seeds,) array}.

    final_entropy, final_reward: after the last update. mean_reward: expected reward averaged
    over all updates (area under the curve: how fast it learned). updates_to_half / entropy_at_half:
    the first update where the expected reward passes halfway from its start to the best
    possible, and the entropy there (NaN if never): is entropy spent faster than reward is won?
    rho and the bounds, clip fractions, ratio_std, neg_adv_frac: means over updates.
    grad_norm / grad_norm_max: mean and largest logit-gradient norm. reward_volatility: std of
    the per-update change of the expected reward.
    """
    m = run.metrics
    task = make_task(run.config.preset, run.config.n_tokens, run.config.n_contexts, run.config.task_seed)
    best = float(task.reward_mean.max(-1).values.mean())
    half = (run.initial["expected_reward"] + best) / 2                          # (seeds,)
    reached = m["expected_reward"] >= half[:, None]
    first = np.where(reached.any(1), reached.argmax(1), -1)
    rows = np.arange(len(first))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = dict(
            final_entropy=m["entropy"][:, -1],
            final_reward=m["expected_reward"][:, -1],
            mean_reward=m["expected_reward"].mean(1),
            updates_to_half=np.where(first >= 0, first + 1.0, np.nan),
            entropy_at_half=np.where(first >= 0, m["entropy"][rows, np.maximum(first, 0)], np.nan),
            rho=np.nanmean(m["rho"], 1),
            rho_before=np.nanmean(m["rho_before"], 1),
            c_low=m["c_low"].mean(1),
            c_high=m["c_high"].mean(1),
            clip_frac_low=m["clip_frac_low"].mean(1),
            clip_frac_high=m["clip_frac_high"].mean(1),
            neg_adv_frac=m["neg_adv_frac"].mean(1),
            ratio_std=m["ratio_std"].mean(1),
            grad_norm=m["grad_norm"].mean(1),
            grad_norm_max=m["grad_norm"].max(1),
            reward_volatility=np.diff(np.concatenate([run.initial["expected_reward"][:, None],
                                                      m["expected_reward"]], 1), axis=1).std(1),
        )
    return out


def sweep(config: BanditConfig | None = None, stalenesses=STALENESSES, rules=RULES, seeds=range(N_SEEDS),
          progress: bool = False, on_result=None) -> dict:
    """Run every (staleness, rule) cell; returns {(staleness, rule): BanditRun}.

    ``config.staleness`` is replaced by each value of ``stalenesses``. ``rules`` are names or
    rule objects. ``on_result(key, run)`` is called as each cell finishes (e.g. to save it).
    """
    config = config or BanditConfig()
    seeds = check_seeds(seeds)
    configs = {k: replace(config, staleness=int(k) if isinstance(k, np.integer) else k)   # BanditConfig checks k
               for k in stalenesses}
    if not list(rules):
        raise ValueError("rules must name at least one rule")
    results = {}
    cells = [(k, r) for k in configs for r in rules]
    for k, rule in tqdm(cells, disable=not progress, desc="bandit sweep", unit="cell"):
        run = simulate(configs[k], rule, seeds)
        results[configs[k].staleness, run.rule] = run
        if on_result is not None:
            on_result((configs[k].staleness, run.rule), run)
    return results


def summary_table(results: dict, baseline: str = "symmetric", level: float = 0.95) -> list:
    """One row per (staleness, rule): every per-seed summary as mean with _lo/_hi band, and for the
    TESTED quantities Welch's p-value (p_<name>) and t (t_<name>) against ``baseline`` at the same
    staleness (absent for the baseline itself or when it was not run)."""
    per_seed = {key: per_seed_summary(run) for key, run in results.items()}
    rows = []
    for (k, rule), summ in per_seed.items():
        run = results[k, rule]
        row = dict(staleness=k, rule=rule, mode=run.config.mode, seeds=len(run.seeds), steps=run.config.steps)
        for name, values in summ.items():
            mean, lo, hi = confidence_band(values, level)
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = float(mean), float(lo), float(hi)
        if rule != baseline and (k, baseline) in per_seed:
            for name in TESTED:
                t, p = welch_test(summ[name], per_seed[k, baseline][name])
                row[f"t_{name}"], row[f"p_{name}"] = t, p
        rows.append(row)
    return rows


def curve_records(key, run: BanditRun, metrics=CURVE_METRICS, level: float = 0.95):
    """Per update: mean and band of each metric over seeds, as dicts (one per update) ready for JSON."""
    k, rule = key
    bands = {name: confidence_band(run.metrics[name], level) for name in metrics if name in run.metrics}
    E = run.config.updates_per_batch
    for t in range(run.config.steps):
        rec = dict(staleness=k, rule=rule, update=t + 1, rollout=t // E + 1)
        for name, (mean, lo, hi) in bands.items():
            rec[name], rec[f"{name}_lo"], rec[f"{name}_hi"] = (None if not np.isfinite(x) else float(x)
                                                                for x in (mean[t], lo[t], hi[t]))
        yield rec


class CurveWriter:
    """Append each finished cell's curves to a JSON-lines file (pass as ``sweep(on_result=...)``)."""

    def __init__(self, path, config: BanditConfig | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w") as f:
            if config is not None:
                f.write(json.dumps(dict(config=config.to_dict())) + "\n")

    def __call__(self, key, run: BanditRun):
        with self.path.open("a") as f:
            for rec in curve_records(key, run):
                f.write(json.dumps(rec) + "\n")


def bounds_ablation(config: BanditConfig | None = None, bounds=((0.8, 1.2), (0.8, 1.28), (0.8, 1.5), (0.8, 2.0),
                                                                 (0.6, 1.2), (0.7, 1.2), (0.9, 1.2)),
                    seeds=range(N_SEEDS), progress: bool = False) -> dict:
    """Fixed bounds (c_low, c_high) side by side (paper Fig. 7: raise c_high, lower c_low);
    returns {(c_low, c_high): BanditRun}. Every pair is a ClipHigher(1 − c_low, c_high − 1)."""
    config = config or BanditConfig()
    out = {}
    for c_low, c_high in tqdm(list(bounds), disable=not progress, desc="bounds", unit="pair"):
        if not (0 < c_low < 1 < c_high):
            raise ValueError(f"bounds must satisfy 0 < c_low < 1 < c_high; got ({c_low}, {c_high})")
        out[c_low, c_high] = simulate(config, ClipHigher(eps_low=1 - c_low, eps_high=c_high - 1), seeds)
    return out


# === rung 1's backend for toy_rl.experiments ======================================================

# RLConfig fields of a bandit run (the rest of BanditConfig's defaults); prompts is S, the contexts per update.
DEFAULTS = dict(steps=300, prompts=4, group_size=8, lr=0.5, advantage="grpo")
SMOKE = dict(steps=100)
# The backend's own settings: BanditConfig fields that RLConfig does not have.
OPTIONS = {"n_tokens": 32, "pg": "vanilla", "task_seed": 0, "dtype": "float64"}
# RLConfig fields the bandit has no use for: they must keep RLConfig's defaults.
UNUSED = ("partial", "max_new_tokens", "temperature", "agg", "dual_clip", "max_grad_norm", "micro_batch",
          "eval_every", "eval_size", "checkpoint_every")
# Per-update statistics a seed's records keep (those simulate logs), in the RL loop's names.
RECORD_METRICS = ("rho", "rho_before", "c_low", "c_high", "clip_frac_low", "clip_frac_high", "grad_norm",
                  "neg_adv_frac", "pos_adv_frac", "neg_mass", "pos_mass", "approx_kl", "search_steps", "ratio_std",
                  "entropy_change")


def rl_defaults(task, preset=None) -> dict:
    return {}


def bandit_config(spec) -> BanditConfig:
    """The :class:`BanditConfig` of a rung-1 spec: the task is the reward preset, S contexts = ``prompts``,
    G = ``group_size``; steps, lr, staleness, mode and advantage from the RLConfig; the rest from the options."""
    rl, default = spec.rl, RLConfig()
    used = [name for name in UNUSED if getattr(rl, name) != getattr(default, name)]
    if used:
        raise ValueError(f"the bandit (rung 1) has no {', '.join(used)}; leave {'it' if len(used) == 1 else 'them'} "
                         "at RLConfig's default")
    return BanditConfig(n_tokens=spec.option("n_tokens"), n_contexts=rl.prompts, group_size=rl.group_size,
                        preset=spec.task, steps=rl.steps, lr=rl.lr, staleness=rl.staleness, mode=rl.mode,
                        pg=spec.option("pg"), advantage=rl.advantage, task_seed=spec.option("task_seed"),
                        dtype=spec.option("dtype"))


def check_spec(spec) -> None:
    """ValueError now for a rung-1 spec the bandit cannot run."""
    bandit_config(spec)


def saved_config(spec) -> dict:
    """What a rung-1 run's ``config.json`` holds: its BanditConfig, rule and seed."""
    return dict(bandit_config(spec).to_dict(), rule=rule_label(spec.rl.rule), seed=spec.rl.seed)


def _num(x):
    x = float(x)
    return x if np.isfinite(x) else None


def seed_records(run: BanditRun, rule: str | None = None) -> list[list[dict]]:
    """Each seed of a :class:`BanditRun` as metric records in the RL loop's vocabulary: per update ``step``,
    ``rule``, ``staleness`` (K), ``seed``, the exact ``expected_reward`` and ``entropy`` of the policy the update
    starts from, ``reward_mean`` (the batch's sampled reward), ``staleness_mean`` (the batch's age) and the
    update's statistics (:data:`RECORD_METRICS`); then ``final`` with the expected reward and entropy after the
    last update."""
    m, k, label = run.metrics, run.config.staleness, rule or run.rule
    before = {name: np.concatenate([run.initial[name][:, None], m[name]], 1) for name in ("expected_reward", "entropy")}
    kept = [name for name in RECORD_METRICS if name in m]
    out = []
    for i, seed in enumerate(run.seeds):
        recs = []
        for t in range(run.config.steps):
            rec = dict(step=t, rule=label, staleness=k, seed=seed,
                       expected_reward=_num(before["expected_reward"][i, t]), entropy=_num(before["entropy"][i, t]),
                       reward_mean=_num(m["sample_reward"][i, t]), staleness_mean=_num(m["staleness"][i, t]))
            rec.update({name: _num(m[name][i, t]) for name in kept})
            recs.append(rec)
        recs.append(dict(step=run.config.steps, rule=label, staleness=k, seed=seed, final=True,
                         expected_reward=_num(before["expected_reward"][i, -1]),
                         entropy=_num(before["entropy"][i, -1])))
        out.append(recs)
    return out


def as_results(results: dict) -> dict:
    """A :func:`sweep`'s {(staleness, rule): BanditRun} as the runner's {(scenario, rule): [records of each seed]},
    for :func:`toy_rl.experiments.summarize`."""
    return {(scenario_name(k, run.config.mode), rule): seed_records(run) for (k, rule), run in results.items()}


def train_seeds(specs, folders) -> list[list[dict]]:
    """Rung 1's runs of one (scenario, rule) cell, all seeds side by side in one :func:`simulate`; each seed's
    ``config.json`` and ``metrics.jsonl`` written to its folder. Returns the records as read back."""
    config = bandit_config(specs[0])
    run = simulate(config, specs[0].rl.rule, [s.rl.seed for s in specs], progress=specs[0].progress)
    out = []
    for spec, folder, recs in zip(specs, folders, seed_records(run, rule_label(specs[0].rl.rule))):
        with lock_run(folder):
            write_text(Path(folder) / "config.json", json.dumps(saved_config(spec), indent=1))
            log = Logbook(Path(folder) / "metrics.jsonl")
            for rec in recs:
                log.write(rec)
            out.append(read_jsonl(Path(folder) / "metrics.jsonl"))
    return out
