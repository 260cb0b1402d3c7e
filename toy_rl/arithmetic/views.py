"""Plots, tables and slider callbacks behind the rung-2 notebooks (04 arithmetic transformer, 05 partial rollout).

Same conventions as :mod:`toy_rl.bandit.views`: every plotting function builds its own
``matplotlib.figure.Figure`` (no pyplot state; ipywidgets 8.1 ``interact`` would not redraw a pyplot
figure) and returns it with the numbers it drew, so a test can check them; the ``*_callback``
factories display the Figure themselves.

The runs come from the library (:func:`toy_rl.arithmetic.compare` / :func:`~toy_rl.arithmetic.load_results`,
:func:`~toy_rl.arithmetic.curve`), the updates from :mod:`toy_rl.rl.loop`, the loss from
:mod:`toy_rl.clipping`. What this module adds, for the notebooks only:

* :func:`load_or_compare` — the finished sweep under ``runs/`` if it is complete, else a (smaller) one run now;
* :func:`seed_stats` — one number per seed (final accuracy, reward volatility, largest gradient norm, ...),
  which the tables, the Welch tests and :func:`claim_verdicts` compare;
* :func:`stale_batch` — the oldest mini-batch of a reuse-K rollout after K real updates, with the current
  log-probs, so that a slider can push it through the clipping core at any bounds (:func:`clip_view`);
* :func:`partial_demo` — a few real updates under partial rollout that keep their batches, so each
  answer's per-token policy versions can be shown (:func:`version_map`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import matplotlib
import matplotlib.cm
import matplotlib.colors
import matplotlib.patches
import matplotlib.ticker
import numpy as np
import torch
from matplotlib.figure import Figure

from .run import DEFAULTS, RULES
from ..experiments import curve, experiment_name, grid, load, scenario_name, sweep
from ..bandit.views import RULE_COLOURS, band, fixed_bounds, smooth, verdict_line
from ..clipping import BAPO, make_rule, policy_loss, token_ratio
from ..rl.entropy_check import QUADRANTS
from ..rl.loop import RLConfig, make_optimizer, update
from ..rl.sources import BatchSource
from .policy import TinyPolicy
from ..stats import welch_test
from .tasks import get_task
from .warmstart import cache_path, load_warmstart

RHO0 = 0.4                      # BAPO's target share (paper §5.1), drawn on the ρ panels
ALPHA = 0.05                    # significance level of the Welch tests behind every verdict
# tabular prediction (DESIGN.md, App. B.4): high-p/high-A and low-p/low-A lower the entropy, the others raise it
TABULAR_SIGN = {"high-p/high-A": -1, "high-p/low-A": +1, "low-p/high-A": +1, "low-p/low-A": -1}
SCENARIO_COLOURS = {"on-policy": "0.15", "reuse-2": "tab:blue", "reuse-4": "tab:purple", "reuse-8": "tab:red",
                    "lag-2": "tab:cyan", "lag-4": "tab:olive", "lag-8": "tab:brown"}


def _colour(name: str, i: int = 0) -> str:
    if name in RULE_COLOURS:
        return RULE_COLOURS[name]
    if name in SCENARIO_COLOURS:
        return SCENARIO_COLOURS[name]
    return "tab:orange" if name.startswith("partial") else f"C{(i + 3) % 10}"


# === runs: load the sweep, or run a smaller one ====================================================

def scenario_names(stalenesses=(0,), mode: str = "reuse", partial: int | None = None) -> list[str]:
    """The scenario folders :func:`toy_rl.arithmetic.compare` writes for these settings, in its order."""
    return [scenario_name(k, mode) for k in stalenesses] + ([scenario_name(0, partial=partial)] if partial else [])


def finished(runs: list[list[dict]]) -> list[list[dict]]:
    """The runs whose log ends with the ``final`` record (a run still in progress has none)."""
    return [recs for recs in runs if recs and recs[-1].get("final")]


def load_or_compare(root, task: str, stalenesses=(0,), partial: int | None = None, rules=RULES, seeds: int = 3,
                    mode: str = "reuse", quick_out=None, progress: bool = True, on_policy_rules=None, **overrides):
    """The runs of every (scenario, rule) with at least ``seeds`` finished seeds.

    Loads ``<root>/<task>/`` (what ``toy-rl arithmetic`` writes) when every (scenario, rule) has
    ``seeds`` finished runs there (all finished seeds are used). Otherwise runs
    :func:`~toy_rl.arithmetic.compare` into ``quick_out`` with ``overrides`` (steps, prompts, warmstart,
    ...); it resumes, so a second call only loads. ``on_policy_rules``: the rules needed on-policy, where
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


def on_policy_check(results: dict, scenario: str = "on-policy", base: str = "symmetric") -> dict:
    """On-policy every ratio is 1 (up to float noise), nothing is clipped and the rules coincide: the largest
    |r − 1|, the largest clip fraction, and the largest difference from ``base``'s run with the same seed of
    the entropy, the sampled reward and the held-out accuracy, over every update and seed."""
    runs = {r: v for (s, r), v in results.items() if s == scenario}
    recs = [rec for v in runs.values() for seed in v for rec in seed if "ratio_max" in rec]
    out = {"ratio_dev": max((max(abs(r["ratio_max"] - 1), abs(1 - r["ratio_min"])) for r in recs), default=math.nan),
           "clip_frac_max": max((r["clip_frac"] for r in recs), default=math.nan)}
    for key in ("entropy", "reward_mean", "accuracy"):
        _, ref = curve(runs[base], key)
        gaps = [np.nanmax(np.abs(curve(v, key)[1] - ref)) if curve(v, key)[1].shape == ref.shape else math.inf
                for r, v in runs.items() if r != base]
        out[f"{key}_gap"] = float(max(gaps, default=0.0))
    return out


# === one number per seed ===========================================================================

def _series(recs: list[dict], key: str) -> np.ndarray:
    """A metric over the updates of one run (records without it, and the final record, left out)."""
    return np.array([r[key] for r in recs if not r.get("final") and r.get(key) is not None], dtype=float)


def _share(flags: np.ndarray) -> float:
    return float(np.mean(flags)) if flags.size else math.nan


def _m(values) -> float:
    """Mean ignoring NaNs; NaN (no warning) when there is nothing to average."""
    v = np.asarray(values, dtype=float)
    return float(np.nanmean(v)) if np.isfinite(v).any() else math.nan


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if values.size else math.nan


def seed_stats(runs: list[list[dict]], early: float = 0.25, tail: float = 0.1) -> dict:
    """Per seed (arrays of shape (seeds,)): what the tables and verdicts compare.

    final_accuracy / start_accuracy / mean_accuracy: greedy held-out accuracy after the last update /
        before the first / averaged over every evaluation (how fast it learned);
    mean_reward: mean sampled reward per update; reward_volatility: std of its update-to-update change;
    start_entropy / final_entropy: mean entropy over the first / last ``tail`` of the updates;
        entropy_drop = start − final;
    grad_norm_max / grad_norm_mean / grad_roughness (mean |update-to-update change|);
    rho, rho_before, c_low, c_high, clip_frac_low, clip_frac_high, neg_adv_frac: means over updates;
    rho_reached: share of BAPO's updates that ended with ρ ≥ ρ0 (NaN for fixed rules); searched: share of
        BAPO's updates whose search moved the bounds at all (ρ started below ρ0); rho_before_min: the
        lowest ρ seen before any search;
    neg_count_early / neg_count_late: share of updates, in the first ``early`` of training / after it,
        with more negative- than positive-advantage tokens; neg_mass_early / neg_mass_late: the same
        for ρ < 0.5 (negatives carry most of the loss);
    len_correct / len_wrong: mean answer length (tokens) of correct / failed answers; longer_wrong: share
        of updates whose failed answers were longer on average;
    staleness_mean / staleness_max / mixed_versions / groups: means over updates;
    update_share: share of steps that made an update (partial rollout skips steps where no group finished).
    """
    keys = ("final_accuracy", "start_accuracy", "mean_accuracy", "mean_reward", "reward_volatility",
            "start_entropy", "final_entropy", "entropy_drop", "grad_norm_max", "grad_norm_mean", "grad_roughness",
            "rho", "rho_before", "rho_reached", "searched", "rho_before_min", "c_low", "c_high", "clip_frac_low",
            "clip_frac_high",
            "neg_adv_frac", "neg_count_early", "neg_count_late", "neg_mass_early", "neg_mass_late",
            "len_correct", "len_wrong", "longer_wrong", "staleness_mean", "staleness_max", "mixed_versions",
            "groups", "update_share")
    out = {k: [] for k in keys}
    for recs in runs:
        acc = _series(recs, "accuracy")
        finals = [r["accuracy"] for r in recs if r.get("final")]
        updates = [r for r in recs if not r.get("final") and "grad_norm" in r]
        steps = [r for r in recs if not r.get("final")]
        cut = max(1, int(round(early * len(steps))))
        first_step = steps[cut - 1]["step"] if steps else 0
        ent, reward, grad = _series(updates, "entropy"), _series(updates, "reward_mean"), _series(updates, "grad_norm")
        n_tail = max(1, int(round(tail * ent.size))) if ent.size else 0
        neg, pos = _series(updates, "neg_adv_frac"), _series(updates, "pos_adv_frac")
        is_early = np.array([r["step"] <= first_step for r in updates], dtype=bool)
        neg_count = np.array([r["neg_adv_frac"] > r["pos_adv_frac"] for r in updates], dtype=bool)
        rho_all = np.array([np.nan if r.get("rho") is None else r["rho"] for r in updates], dtype=float)
        has_rho = np.isfinite(rho_all)
        is_bapo = bool(updates) and "rho_reached" in updates[0]
        rho_before = _series(updates, "rho_before")
        both_len = [r for r in updates if r.get("len_correct") is not None and r.get("len_wrong") is not None]
        row = dict(
            final_accuracy=finals[-1] if finals else math.nan,
            start_accuracy=acc[0] if acc.size else math.nan,
            mean_accuracy=_mean(np.concatenate([acc, finals])) if acc.size or finals else math.nan,
            mean_reward=_mean(reward),
            reward_volatility=float(np.std(np.diff(reward))) if reward.size > 2 else math.nan,
            start_entropy=_mean(ent[:n_tail]), final_entropy=_mean(ent[-n_tail:]) if n_tail else math.nan,
            grad_norm_max=float(grad.max()) if grad.size else math.nan, grad_norm_mean=_mean(grad),
            grad_roughness=_mean(np.abs(np.diff(grad))),
            rho=_mean(rho_all[has_rho]), rho_before=_mean(rho_before),
            rho_reached=_mean(_series(updates, "rho_reached")),
            searched=_share(_series(updates, "search_steps") > 0) if is_bapo else math.nan,
            rho_before_min=float(rho_before.min()) if rho_before.size else math.nan,
            c_low=_mean(_series(updates, "c_low")), c_high=_mean(_series(updates, "c_high")),
            clip_frac_low=_mean(_series(updates, "clip_frac_low")),
            clip_frac_high=_mean(_series(updates, "clip_frac_high")),
            neg_adv_frac=_mean(neg),
            neg_count_early=_share(neg_count[is_early & ((neg + pos) > 0)]),
            neg_count_late=_share(neg_count[~is_early & ((neg + pos) > 0)]),
            neg_mass_early=_share(rho_all[is_early & has_rho] < 0.5),
            neg_mass_late=_share(rho_all[~is_early & has_rho] < 0.5),
            len_correct=_mean(_series(updates, "len_correct")), len_wrong=_mean(_series(updates, "len_wrong")),
            longer_wrong=_share(np.array([r["len_wrong"] > r["len_correct"] for r in both_len], dtype=bool)),
            staleness_mean=_mean(_series(updates, "staleness_mean")),
            staleness_max=_mean(_series(updates, "staleness_max")),
            mixed_versions=_mean(_series(updates, "mixed_versions")), groups=_mean(_series(updates, "groups")),
            update_share=len(updates) / len(steps) if steps else math.nan)
        row["entropy_drop"] = row["start_entropy"] - row["final_entropy"]
        for k in keys:
            out[k].append(row[k])
    return {k: np.array(v, dtype=float) for k, v in out.items()}


def stats_table(results: dict, keys, label=lambda s, r: f"{s:<10} {r}") -> dict:
    """{label: {key: mean over seeds}} for :func:`toy_rl.bandit.views.format_rows`."""
    rows = {}
    for (scenario, rule), runs in results.items():
        s = seed_stats(runs)
        rows[label(scenario, rule)] = {k: _m(s[k]) for k in keys}
    return rows


def rule_tests(results: dict, scenarios, metric: str = "final_accuracy") -> dict:
    """Per scenario: each rule's mean of a per-seed metric and Welch p for BAPO vs clip-higher,
    clip-higher vs symmetric and BAPO vs symmetric. {scenario: {...}}."""
    out = {}
    for s in scenarios:
        v = {r: seed_stats(results[s, r])[metric] for r in RULES if (s, r) in results}
        row = {r: _m(x) for r, x in v.items()}
        for a, b, name in (("bapo", "clip-higher", "p_bapo_vs_ch"), ("clip-higher", "symmetric", "p_ch_vs_sym"),
                           ("bapo", "symmetric", "p_bapo_vs_sym")):
            row[name] = welch_test(v[a], v[b])[1] if a in v and b in v else math.nan
        out[s] = row
    return out


# === figures over training =========================================================================

RULE_PANELS = (("accuracy", "held-out accuracy (greedy)", 1), ("reward_mean", "sampled reward", 10),
               ("entropy", "entropy (nats / token)", 10), ("rho", "ρ: positive share of the loss", 10),
               ("bounds", "ratio bounds", 10), ("clip_frac_low", "clip fraction low (r<c_low, A<0)", 10),
               ("clip_frac_high", "clip fraction high (r>c_high, A>0)", 10), ("grad_norm", "gradient norm", 10))
SCENARIO_PANELS = (("accuracy", "held-out accuracy (greedy)", 1), ("reward_mean", "sampled reward", 10),
                   ("entropy", "entropy (nats / token)", 10), ("grad_norm", "gradient norm", 1),
                   ("clip_frac", "clip fraction (low + high)", 10), ("approx_kl", "KL(behaviour ‖ policy), k3", 10))


def _panel(ax, runs, metric: str, colour: str, label: str | None, window: int) -> float:
    """Draw one metric of one (scenario, rule) with its band; returns its mean over seeds and updates."""
    if metric == "bounds":
        for key, ls in (("c_high", "-"), ("c_low", "--")):
            x, table = curve(runs, key)
            if x.size:
                band(ax, x, table, colour, label if ls == "-" else None, window, ls=ls)
        return math.nan
    x, table = curve(runs, metric)
    if not x.size:
        return math.nan
    band(ax, x, table, colour, label, window, ls="-o" if metric == "accuracy" else "-")
    return _m(table)


def _grid(n: int, cols: int = 4, height: float = 3.1):
    fig = Figure(figsize=(4.3 * cols, height * math.ceil(n / cols)), layout="constrained")
    axes = np.asarray(fig.subplots(math.ceil(n / cols), cols)).reshape(-1)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes


def rule_bands(results: dict, scenario: str, panels=RULE_PANELS, rho0: float | None = RHO0):
    """The three rules side by side in one scenario, mean and 95% Student-t band over seeds (noisy per-update
    metrics averaged over the panel's window of updates, per seed, before the band).
    Returns (figure, {rule: {metric: mean over seeds and updates}})."""
    rules = [r for (s, r) in results if s == scenario]
    if not rules:
        raise ValueError(f"no runs for scenario {scenario!r}; have {sorted({s for s, _ in results})}")
    fig, axes = _grid(len(panels))
    out = {r: {} for r in rules}
    for ax, (metric, label, window) in zip(axes, panels):
        for i, rule in enumerate(rules):
            out[rule][metric] = _panel(ax, results[scenario, rule], metric, _colour(rule, i), rule, window)
        if metric == "rho" and rho0 is not None:
            ax.axhline(rho0, color="0.3", ls=":", lw=1, label=f"ρ0 = {rho0}")
            ax.legend(fontsize=7)
        if metric == "bounds":
            ax.axhline(1.0, color="0.6", lw=0.6)
            ax.set_title("solid c_high, dashed c_low", fontsize=9)
        ax.set_xlabel("step" + (f" (mean of {window})" if window > 1 else ""))
        ax.set_ylabel(label, fontsize=9)
    axes[0].legend(fontsize=8)
    n = min(len(results[scenario, r]) for r in rules)
    fig.suptitle(f"{scenario}: the three rules, 95% bands over {n} seeds", fontsize=11)
    return fig, out


def scenario_bands(results: dict, rule: str, scenarios=None, panels=SCENARIO_PANELS):
    """One rule across scenarios (e.g. on-policy and every staleness), with 95% bands over seeds.
    Returns (figure, {scenario: {metric: mean over seeds and updates}})."""
    scenarios = scenarios or [s for (s, r) in results if r == rule]
    fig, axes = _grid(len(panels), cols=3)
    out = {s: {} for s in scenarios}
    for ax, (metric, label, window) in zip(axes, panels):
        for i, s in enumerate(scenarios):
            out[s][metric] = _panel(ax, results[s, rule], metric, _colour(s, i), s, window)
        ax.set_xlabel("step" + (f" (mean of {window})" if window > 1 else ""))
        ax.set_ylabel(label, fontsize=9)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{rule} in every scenario, 95% bands over seeds", fontsize=11)
    return fig, out


def rules_callback(results: dict, panels=RULE_PANELS):
    """What ``interact`` calls: scenario -> {rule: means}; displays :func:`rule_bands`' figure itself."""
    from IPython.display import display

    def callback(scenario: str) -> dict:
        fig, means = rule_bands(results, scenario, panels)
        display(fig)
        return {r: {k: round(v, 4) for k, v in m.items() if math.isfinite(v)} for r, m in means.items()}
    return callback


# === the task and the warm start ===================================================================

def answers_table(model, task, problems, samples: int = 3, seed: int = 0) -> list[dict]:
    """What the model writes for each problem: its greedy answer and ``samples`` sampled ones (temperature 1),
    each with its reward, next to the supervised target."""
    from .model.evaluate import complete
    task = get_task(task)
    prompts = [p.prompt for p in problems]
    n = task.max_answer_chars + 1
    greedy = complete(model, prompts, n)
    g = torch.Generator(device=model.device).manual_seed(seed)
    sampled = [complete(model, prompts, n, temperature=1.0, generator=g) for _ in range(samples)]
    return [dict(prompt=p.prompt, target=task.supervised_target(p), greedy=greedy[i],
                 greedy_reward=task.reward(p, greedy[i]),
                 sampled=[s[i] for s in sampled], sampled_rewards=[task.reward(p, s[i]) for s in sampled])
            for i, p in enumerate(problems)]


def warmstart_view(task, config=None):
    """The cached warm start's training curve (loss, sampled validation accuracy) and its summary
    (held-out accuracy greedy / sampled, steps, seconds). Returns (figure, summary)."""
    path = cache_path(task, config).with_suffix(".jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    summary = next((r["summary"] for r in rows if "summary" in r), {})
    loss = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    val = [(r["step"], r["val_acc_sampled"]) for r in rows if "val_acc_sampled" in r]
    fig = Figure(figsize=(10, 3.2), layout="constrained")
    a, b = fig.subplots(1, 2)
    if loss:
        x, y = np.array(loss).T
        a.plot(x, y, color="0.7", lw=0.6)
        a.plot(x, smooth(y, 25), color="k", lw=1.5, label="mean of 25")
        a.set_yscale("log")
        a.legend(fontsize=8)
    a.set_xlabel("supervised step")
    a.set_ylabel("cross-entropy on answer tokens")
    if val:
        x, y = np.array(val).T
        b.plot(x, y, "o-", color="tab:green", label="validation, sampled (stop rule)")
    for key, ls in (("heldout_acc_greedy", "--"), ("heldout_acc_sampled", ":")):
        if key in summary:
            b.axhline(summary[key], color="k", ls=ls, lw=1, label=f"held-out {key.split('_')[-1]}: {summary[key]:.2f}")
    b.set_xlabel("supervised step")
    b.set_ylabel("accuracy")
    b.set_ylim(0, 1)
    b.legend(fontsize=8)
    fig.suptitle(f"warm start of {get_task(task).name}: {summary.get('steps', '?')} steps, "
                 f"{summary.get('params', '?')} parameters", fontsize=10)
    return fig, summary


# === the Entropy-Clip Rule on the transformer =====================================================

def entropy_check_view(report: dict):
    """Measured ΔH against −Cov(log π, Δz) at every answer position, per rule, and the summed ΔH per quadrant
    next to the tabular prediction's sign. ``report``: :func:`toy_rl.arithmetic.entropy_check`.
    Returns (figure, {rule: {correlation, sign_agreement, median_rel_error, <quadrant>: ΔH, signs_as_tabular}})."""
    rules = [k for k in report if k != "error_slope"]
    fig = Figure(figsize=(4.2 * (len(rules) + 1), 3.6), layout="constrained")
    axes = fig.subplots(1, len(rules) + 1)
    rows = {}
    for ax, rule in zip(axes, rules):
        r = report[rule]
        ex, pr = np.asarray(r["exact"]), np.asarray(r["predicted"])
        ax.scatter(pr, ex, s=4, alpha=0.4, color=_colour(rule))
        if pr.size:
            lim = float(np.abs(np.concatenate([ex, pr])).max()) or 1.0
            ax.plot([-lim, lim], [-lim, lim], color="k", lw=0.8)
        ax.set_xlabel("predicted −Cov(log π, Δz)")
        ax.set_ylabel("measured ΔH")
        ax.set_title(f"{rule}: corr {r['correlation']:.3f}, sign {r['sign_agreement']:.3f}", fontsize=9)
        dH = r["quadrant_dH"]
        with_positions = [q for q in QUADRANTS if r["quadrant_count"][q] > 0]
        rows[rule] = dict(correlation=r["correlation"], sign_agreement=r["sign_agreement"],
                          median_rel_error=r["median_rel_error"], **{q: dH[q] for q in QUADRANTS},
                          signs_as_tabular=sum(np.sign(dH[q]) == TABULAR_SIGN[q] for q in with_positions),
                          quadrants=len(with_positions))
    ax = axes[-1]
    w = 0.8 / max(len(rules), 1)
    for i, rule in enumerate(rules):
        ax.bar(np.arange(4) + (i - (len(rules) - 1) / 2) * w, [rows[rule][q] for q in QUADRANTS], w,
               color=_colour(rule, i), label=rule)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(4), [q.replace("/", "\n") + "\ntabular: " + ("lowers" if TABULAR_SIGN[q] < 0 else "raises")
                             for q in QUADRANTS], fontsize=7)
    ax.set_ylabel("summed measured ΔH (nats)")
    ax.set_title(f"quadrants (error slope vs η: {report.get('error_slope', math.nan):.2f})", fontsize=9)
    ax.legend(fontsize=7)
    return fig, rows


# === a stored stale batch, pushed through the clipping core at any bounds ==========================

class StoredBatch(NamedTuple):
    """One batch of sampled answers with the behaviour log-probs recorded at sampling time and the log-probs
    of the policy that trains on it now (``staleness`` updates later)."""
    logp: torch.Tensor          # (B, N) current policy
    old_logp: torch.Tensor      # (B, N) behaviour policy
    advantages: torch.Tensor    # (B,)
    mask: torch.Tensor          # (B, N)
    rewards: torch.Tensor       # (B,)
    staleness: int
    task: str


def stale_batch(task: str = "add", staleness: int = 4, seed: int = 0, warmstart=None, device="auto",
                rule: str = "symmetric", **overrides) -> StoredBatch:
    """The oldest mini-batch of a reuse-``staleness`` rollout, as the loop would see it.

    From the cached warm start, one rollout of (K+1)·P prompts is split into K+1 mini-batches
    (:class:`toy_rl.rl.sources.BatchSource`, mode "reuse"); K real updates (``rule``, the default RL
    settings of :data:`toy_rl.arithmetic.DEFAULTS` unless overridden) train on the first K; the last one is
    returned with the current policy's log-probs of its tokens, K updates after it was sampled.
    """
    t = get_task(task)
    cfg = RLConfig(**{**{k: DEFAULTS[k] for k in ("lr", "prompts", "group_size")}, **overrides,
                      "staleness": staleness, "seed": seed, "rule": rule})
    torch.manual_seed(seed)
    policy = TinyPolicy(load_warmstart(t, warmstart, device=device, progress=False))
    source = BatchSource(policy, t, cfg.prompts, cfg.group_size, t.max_answer_chars + 1, staleness, "reuse",
                         seed=seed)
    opt = make_optimizer(policy, cfg.lr)
    for version in range(staleness):
        update(policy, opt, source.next(version), make_rule(rule), cfg)
    batch = source.next(staleness)
    with torch.no_grad():
        logp, _ = policy.score(batch.input_ids, batch.attention_mask, batch.start)
    return StoredBatch(logp.cpu(), batch.old_logp, batch.advantages, batch.response_mask, batch.rewards,
                       staleness, t.name)


def _ratio_ticks(axis, ratio: np.ndarray) -> None:
    """Readable ticks on a log-scaled ratio axis: 0.1, 0.2, 0.5, 0.8, 1, 1.2, 2, 3, 5, 10 within the data."""
    lo, hi = (float(ratio.min()), float(ratio.max())) if ratio.size else (0.5, 2.0)
    ticks = [t for t in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.8, 1.0, 1.2, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0)
             if lo / 1.5 <= t <= hi * 1.5]
    axis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def clip_view(stored: StoredBatch, c_low: float, c_high: float):
    """The stored batch through the clipping core at bounds [c_low, c_high] (and at BAPO's own search).

    Three panels: each token's ratio against its behaviour probability (clipped tokens ×); the ratio
    histograms of A > 0 and A < 0 tokens with the bounds; the positive and negative loss mass that keeps
    its gradient, with ρ. Returns (figure, summary) where the summary is ``policy_loss``'s numbers at these
    bounds (loss, ρ, masses, clip fractions) plus where BAPO lands on the same batch.
    """
    rule = fixed_bounds(float(c_low), float(c_high))
    _, st = policy_loss(stored.logp, stored.old_logp, stored.advantages, stored.mask, rule)
    _, bapo = policy_loss(stored.logp, stored.old_logp, stored.advantages, stored.mask, BAPO())
    m = stored.mask > 0
    ratio = token_ratio(stored.logp, stored.old_logp)[m].numpy()
    adv = stored.advantages[:, None].expand_as(stored.mask)[m].numpy()
    p_old = stored.old_logp.exp()[m].numpy()
    clipped = ((ratio < c_low) & (adv < 0)) | ((ratio > c_high) & (adv > 0))

    fig = Figure(figsize=(15, 3.8), layout="constrained")
    a, b, c = fig.subplots(1, 3)
    a.axhspan(c_low, c_high, color="tab:green", alpha=0.12, label="[c_low, c_high]")
    for sign, colour, name in ((0, "0.6", "A = 0 (no gradient)"), (1, "tab:green", "A > 0"), (-1, "tab:red", "A < 0")):
        sel = (np.sign(adv) == sign)
        a.scatter(p_old[sel & ~clipped], ratio[sel & ~clipped], s=6, alpha=0.4, color=colour, label=name)
        a.scatter(p_old[sel & clipped], ratio[sel & clipped], s=30, marker="x", color=colour)
    a.set_xscale("log")
    a.set_yscale("log")
    _ratio_ticks(a.yaxis, ratio)
    a.set_xlabel("behaviour probability of the token")
    a.set_ylabel("ratio r = π/π_b")
    a.set_title(f"{int(clipped.sum())} of {ratio.size} tokens lose their gradient (×)", fontsize=9)
    a.legend(fontsize=7, loc="upper right")

    bins = np.geomspace(max(float(ratio.min()), 1e-3) * 0.99, float(ratio.max()) * 1.01 + 1e-9, 40)
    for sign, colour, name in ((0, "0.6", "A = 0"), (1, "tab:green", "A > 0"), (-1, "tab:red", "A < 0")):
        if (np.sign(adv) == sign).any():
            b.hist(ratio[np.sign(adv) == sign], bins=bins, color=colour, alpha=0.5, label=name)
    for x, ls, name in ((c_low, "--", "c_low"), (c_high, "-", "c_high")):
        b.axvline(x, color="k", ls=ls, lw=1, label=f"{name} = {x:.2f}")
    b.axvline(bapo["c_low"], color="tab:blue", ls="--", lw=1)
    b.axvline(bapo["c_high"], color="tab:blue", ls="-", lw=1, label=f"BAPO [{bapo['c_low']:.2f}, {bapo['c_high']:.2f}]")
    b.set_xscale("log")
    _ratio_ticks(b.xaxis, ratio)
    b.set_yscale("log")
    b.set_xlabel("ratio r")
    b.set_ylabel("tokens")
    b.set_title(f"staleness {stored.staleness}: ratios of {stored.task} answers", fontsize=9)
    b.legend(fontsize=7)

    c.bar([0, 1], [st["pos_mass"], st["neg_mass"]], color=["tab:green", "tab:red"])
    c.set_xticks([0, 1], ["positive mass\n(A>0, r ≤ c_high)", "negative mass\n(A<0, r ≥ c_low)"], fontsize=8)
    c.set_title(f"ρ = {st['rho']:.3f} (ρ0 = {RHO0}), loss {st['loss']:+.4f}", fontsize=9)
    summary = {k: st[k] for k in ("c_low", "c_high", "loss", "rho", "pos_mass", "neg_mass", "clip_frac_low",
                                  "clip_frac_high")}
    summary.update(tokens_clipped=int(clipped.sum()), bapo_c_low=bapo["c_low"], bapo_c_high=bapo["c_high"],
                   bapo_rho=bapo["rho"], bapo_rho_before=bapo["rho_before"])
    return fig, summary


def clip_callback(stored: StoredBatch):
    """What ``interact`` calls: (c_low, c_high) -> summary; displays :func:`clip_view`'s figure itself."""
    from IPython.display import display

    def callback(c_low: float, c_high: float) -> dict:
        fig, summary = clip_view(stored, c_low, c_high)
        display(fig)
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in summary.items()}
    return callback


# === partial rollout ===============================================================================

def partial_demo(task: str = "scratchpad", budget: int = 8, steps: int = 12, prompts: int = 8, group_size: int = 4,
                 rule: str = "bapo", seed: int = 0, warmstart=None, device="auto", **overrides) -> dict:
    """A few real updates under partial rollout, keeping every batch (so its per-token versions can be shown).

    Same pieces as :func:`toy_rl.rl.loop.train`: a :class:`~toy_rl.rl.sources.BatchSource` with a token
    budget hands out the groups that finished at each step, and one clipped update trains on them.
    Returns {"batches": [(step, Batch)], "steps": [{step, groups, staleness_mean, staleness_max,
    mixed_versions}], "budget", "task"}.
    """
    from ..rl.loop import batch_metrics
    t = get_task(task)
    cfg = RLConfig(**{"lr": DEFAULTS["lr"], **overrides, "rule": rule, "partial": budget, "seed": seed,
                      "prompts": prompts, "group_size": group_size})
    torch.manual_seed(seed)
    policy = TinyPolicy(load_warmstart(t, warmstart, device=device, progress=False))
    source = BatchSource(policy, t, prompts, group_size, t.max_answer_chars + 1, budget=budget, seed=seed)
    opt = make_optimizer(policy, cfg.lr)
    batches, rows = [], []
    for step in range(steps):
        batch = source.next(step)
        row = {"step": step, "groups": 0}
        if batch is not None:
            row.update(batch_metrics(batch, step))
            update(policy, opt, batch, make_rule(rule), cfg)
            batches.append((step, batch))
        rows.append(row)
    return {"batches": batches, "steps": rows, "budget": budget, "task": t.name}


def answer_versions(batch, step: int) -> list[dict]:
    """Every answer of a batch: its text, the policy version that wrote each token, its reward, and
    each token's age (updates between writing it and training on it at ``step``)."""
    from .model.tokenizer import decode
    out = []
    answers = [(g, a) for g in batch.groups for a in g.answers]
    for (g, a), reward in zip(answers, batch.rewards.tolist()):
        out.append(dict(prompt=g.problem.prompt, text="".join(decode([tok]) or "·" for tok in a.tokens),
                        versions=list(a.version),
                        ages=[step - v for v in a.version], reward=reward))
    return out


def version_map(demo: dict, answers: int = 8):
    """The last ``answers`` answers trained on in a :func:`partial_demo`, character by character, each
    coloured by the policy version that wrote it (· marks the end-of-answer token).
    Returns (figure, rows) with rows as :func:`answer_versions` gives them plus the update ``step``."""
    rows = []
    for step, batch in reversed(demo["batches"]):
        for r in answer_versions(batch, step):
            rows.append({**r, "step": step})
            if len(rows) == answers:
                break
        if len(rows) == answers:
            break
    rows.reverse()
    width = max((len(r["text"]) for r in rows), default=1)
    fig = Figure(figsize=(min(0.19 * width + 3.5, 16), 0.42 * max(len(rows), 1) + 1.2), layout="constrained")
    ax = fig.subplots()
    vmax = max((max(r["ages"]) for r in rows if r["ages"]), default=1) or 1
    cmap = matplotlib.colormaps["viridis_r"]
    for i, r in enumerate(rows):
        y = len(rows) - 1 - i
        for j, (ch, age, v) in enumerate(zip(r["text"], r["ages"], r["versions"])):
            ax.add_patch(matplotlib.patches.Rectangle((j, y - 0.45), 1, 0.9, color=cmap(age / vmax), lw=0))
            ax.text(j + 0.5, y, ch, ha="center", va="center", fontsize=8, family="monospace",
                    color="white" if age / vmax > 0.5 else "black")
        ax.text(width + 0.5, y, f"v{r['versions'][0]}→v{r['versions'][-1]}  R={r['reward']:.0f}  (update {r['step']})"
                if r["versions"] else "", va="center", fontsize=8)
    ax.set_xlim(0, width + 12)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)), [r["prompt"] for r in reversed(rows)], family="monospace", fontsize=8)
    ax.set_xlabel("answer position (token)")
    norm = matplotlib.colors.Normalize(0, vmax)
    fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, label="age of the token (updates)")
    ax.set_title(f"{demo['task']}, budget {demo['budget']} tokens per step: colour = how many updates ago "
                 "the token was written", fontsize=9)
    return fig, rows


def budget_callback(task: str = "scratchpad", steps: int = 12, answers: int = 6, **kwargs):
    """What ``interact`` calls: budget -> staleness numbers; displays the version map of a fresh demo."""
    from IPython.display import display

    def callback(budget: int) -> dict:
        demo = partial_demo(task, int(budget), steps, **kwargs)
        fig, _ = version_map(demo, answers)
        display(fig)
        return demo_summary(demo)
    return callback


def demo_summary(demo: dict) -> dict:
    """Steps that made an update, mean token age, largest age and share of answers mixing versions."""
    rows = [r for r in demo["steps"] if r["groups"]]
    mean = lambda k: round(float(np.mean([r[k] for r in rows])), 3) if rows else math.nan
    return dict(budget=demo["budget"], updates=len(rows), steps=len(demo["steps"]),
                staleness_mean=mean("staleness_mean"), staleness_max=max((r["staleness_max"] for r in rows),
                                                                         default=math.nan),
                mixed_versions=mean("mixed_versions"), groups_per_update=mean("groups"))


PARTIAL_PANELS = (("staleness_mean", "mean token age (updates)", 10), ("staleness_max", "oldest token (updates)", 10),
                  ("mixed_versions", "answers mixing versions (share)", 10), ("groups", "groups per update", 10))


def partial_curves(results: dict, scenarios, panels=PARTIAL_PANELS):
    """How stale partial rollout makes the data, over training, for each scenario (all rules' seeds pooled).
    Returns (figure, {scenario: {metric: mean}, plus update_share})."""
    fig, axes = _grid(len(panels))
    out = {}
    for i, s in enumerate(scenarios):
        runs = [recs for (sc, _), rs in results.items() if sc == s for recs in rs]
        st = seed_stats(runs)
        out[s] = {m: _m(st[m]) for m, _, _ in panels}
        out[s]["update_share"] = _m(st["update_share"])
        for ax, (metric, label, window) in zip(axes, panels):
            _panel(ax, runs, metric, _colour(s, i), s, window)
            ax.set_xlabel("step" + (f" (mean of {window})" if window > 1 else ""))
            ax.set_ylabel(label, fontsize=9)
    axes[0].legend(fontsize=8)
    return fig, out


def length_view(results: dict, scenarios, window: int = 10):
    """Claim 2's length half: mean length of correct and of failed answers over training, per scenario (all
    rules' seeds pooled; solid correct, dashed failed). Returns (figure, {scenario: {len_correct, len_wrong,
    longer_wrong, p}}) with p Welch's test of the per-seed mean lengths."""
    fig = Figure(figsize=(5.2 * len(scenarios), 3.3), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(scenarios)))
    out = {}
    for ax, s in zip(axes, scenarios):
        runs = [recs for (sc, _), rs in results.items() if sc == s for recs in rs]
        for key, colour, ls, name in (("len_correct", "tab:green", "-", "correct"),
                                      ("len_wrong", "tab:red", "--", "failed")):
            x, table = curve(runs, key)
            if x.size:
                band(ax, x, table, colour, name, window, ls=ls)
        st = seed_stats(runs)
        out[s] = dict(len_correct=_m(st["len_correct"]), len_wrong=_m(st["len_wrong"]),
                      longer_wrong=_m(st["longer_wrong"]),
                      p=welch_test(st["len_wrong"], st["len_correct"])[1])
        ax.set_title(f"{s}: failed − correct {out[s]['len_wrong'] - out[s]['len_correct']:+.2f} tokens "
                     f"(p = {out[s]['p']:.2g})", fontsize=9)
        ax.set_xlabel("step" + (f" (mean of {window})" if window > 1 else ""))
        ax.set_ylabel("answer length (tokens, EOS included)")
        ax.legend(fontsize=8)
    return fig, out


def accuracy_vs_groups(results: dict, scenarios, points: int = 50):
    """Held-out accuracy against the number of groups trained on so far, per scenario (all rules' seeds pooled):
    the fair axis when scenarios train on different numbers of samples per update (partial rollout trains only
    on the groups that finished). Each run is interpolated onto a common grid up to the fewest groups any run
    reached, so every curve covers the same samples. Returns (figure, {scenario: {groups, accuracy, p}}) with
    the accuracy at that common count and Welch's p against the first scenario."""
    per = {}
    for s in scenarios:
        per[s] = []
        for (sc, _), rs in results.items():
            if sc != s:
                continue
            for recs in rs:
                seen, xs, ys = 0, [], []
                for r in recs:
                    if r.get("accuracy") is not None:
                        xs.append(seen)
                        ys.append(r["accuracy"])
                    if "grad_norm" in r:
                        seen += r.get("groups", 0)
                per[s].append((np.array(xs, dtype=float), np.array(ys, dtype=float)))
    reach = min(x[-1] for runs in per.values() for x, _ in runs)
    grid = np.linspace(0, reach, points)
    fig = Figure(figsize=(6.5, 3.6), layout="constrained")
    ax = fig.subplots()
    out, ref = {}, None
    for i, s in enumerate(scenarios):
        table = np.array([np.interp(grid, x, y) for x, y in per[s]])
        band(ax, grid, table, _colour(s, i), s)
        for x, y in per[s]:                                   # the evaluations themselves
            keep = x <= reach
            ax.plot(x[keep], y[keep], ".", color=_colour(s, i), alpha=0.35, ms=4)
        at = table[:, -1]
        ref = at if ref is None else ref
        out[s] = {"groups": float(reach), "accuracy": float(at.mean()),
                  "p": welch_test(at, ref)[1] if s != scenarios[0] else math.nan}
    ax.set_xlabel("groups trained on so far")
    ax.set_ylabel("held-out accuracy (greedy)")
    ax.legend(fontsize=8)
    ax.set_title(f"at equal samples: up to {reach:.0f} groups, 95% bands over every run", fontsize=9)
    return fig, out


# === the paper's claims, verdicts computed from the runs ===========================================

def _cmp(a, b, higher: bool = True) -> tuple[bool, bool, float]:
    """(right direction, significant at ALPHA, p) for per-seed arrays a vs b."""
    p = welch_test(a, b)[1]
    d = _m(a) - _m(b)
    right = bool(d > 0) if higher else bool(d < 0)
    return right, bool(right and p < ALPHA), p


def _word(right: bool, sig: bool, p: float) -> str:
    """yes / same direction, within noise / no / the opposite (significant the other way)."""
    if sig:
        return f"yes (p = {p:.2g})"
    if right:
        return f"same direction, within noise (p = {p:.2g})"
    if math.isfinite(p) and p < ALPHA:
        return f"no: the opposite (p = {p:.2g})"
    return f"no (p = {p:.2g})" if math.isfinite(p) else "no"


def _verdict(parts: list[tuple[bool, bool]]) -> object:
    """True if every part is significant, 'partly' if some part is (or all point the right way), else False."""
    if parts and all(s for _, s in parts):
        return True
    if any(s for _, s in parts):
        return "partly"
    if parts and all(r for r, _ in parts):
        return "same direction, within noise"
    return False


def claim_verdicts(results: dict, stale: list[str], base: str = "on-policy", focus=None) -> list[str]:
    """One line per claim 1–5, computed from per-seed numbers (:func:`seed_stats`) and Welch tests.

    ``stale``: the off-policy scenarios (e.g. reuse-2, reuse-4, reuse-8, or partial-8); ``base``: the
    on-policy scenario they are compared with (only its symmetric runs are used: on-policy the rules
    coincide); ``focus``: the scenarios claim 5 is about (default: those of ``stale`` named reuse-2 /
    reuse-4, else all of ``stale``). A part counts only at p < 0.05.
    """
    S = {key: seed_stats(runs) for key, runs in results.items()}
    most = stale[-1]
    lines = []

    # 1: symmetric, base -> most stale
    sb, sk = S[base, "symmetric"], S[most, "symmetric"]
    vol = _cmp(sk["reward_volatility"], sb["reward_volatility"])
    spike = _cmp(sk["grad_norm_max"], sb["grad_norm_max"])
    fall = _cmp(sk["final_entropy"], sb["final_entropy"], higher=False)
    g0, g1 = _m(sb["groups"]), _m(sk["groups"])
    caveat = ("" if not (g1 < 0.9 * g0) else
              f". Caveat: {most} trains on {g1:.1f} groups per update against {g0:.0f} on-policy, and a smaller batch "
              "alone makes the sampled reward and the gradient noisier")
    lines.append(verdict_line(1, "more staleness: reward more volatile, gradient-norm spikes, entropy falls faster",
                              _verdict([vol[:2], spike[:2], fall[:2]]),
                              f"symmetric, {base} -> {most}: reward volatility {_m(sb['reward_volatility']):.3f} -> "
                              f"{_m(sk['reward_volatility']):.3f} [{_word(*vol)}]; largest gradient norm "
                              f"{_m(sb['grad_norm_max']):.2f} -> {_m(sk['grad_norm_max']):.2f} [{_word(*spike)}]; "
                              f"final entropy {_m(sb['final_entropy']):.3f} -> {_m(sk['final_entropy']):.3f} "
                              f"(lower = faster fall) [{_word(*fall)}]{caveat}"))

    # 2: negatives dominate count and loss (symmetric, every scenario); failed answers longer
    scen = [base] + list(stale)
    count_early = min(_m(S[s, "symmetric"]["neg_count_early"]) for s in scen)
    count_late = max(_m(S[s, "symmetric"]["neg_count_late"]) for s in scen)
    mass = {s: _m(np.concatenate([S[s, "symmetric"]["neg_mass_early"], S[s, "symmetric"]["neg_mass_late"]]))
            for s in scen}
    lw = np.concatenate([S[s, "symmetric"]["len_wrong"] for s in scen])
    lc = np.concatenate([S[s, "symmetric"]["len_correct"] for s in scen])
    longer = _cmp(lw, lc)
    start = _m(np.concatenate([S[s, "symmetric"]["start_accuracy"] for s in scen]))
    least_mass = min(mass.values())
    parts = [(count_early > 0.5, count_early > 0.5), (least_mass > 0.5, least_mass > 0.5), longer[:2]]
    lines.append(verdict_line(2, "negative-advantage tokens dominate count and loss (longer failed answers)",
                              _verdict(parts),
                              f"symmetric, starting from {start:.0%} held-out accuracy: more negative than positive "
                              f"tokens in at least {count_early:.0%} of the first quarter's updates (at most "
                              f"{count_late:.0%} later); "
                              "ρ < 0.5 in " + ", ".join(f"{s} {m:.0%}" for s, m in mass.items()) + " of updates; failed "
                              f"answers {_m(lw):.2f} vs correct {_m(lc):.2f} tokens [{_word(*longer)}]"))

    # 3: raising c_high keeps entropy up and helps; lowering c_low hurts
    ent = [_cmp(S[s, "clip-higher"]["final_entropy"], S[s, "symmetric"]["final_entropy"]) for s in stale]
    acc = [_cmp(S[s, "clip-higher"]["final_accuracy"], S[s, "symmetric"]["final_accuracy"]) for s in stale]
    bapo_high = _m([_m(S[s, "bapo"]["c_high"]) for s in stale])
    bapo_low = _m([_m(S[s, "bapo"]["c_low"]) for s in stale])
    low_text = "lowering c_low is not isolated here (BAPO moved c_high too)"
    parts3 = [(any(e[0] for e in ent), any(e[1] for e in ent)), (any(a[0] for a in acc), any(a[1] for a in acc))]
    if bapo_high < 1.2 + 0.02:           # BAPO stayed at [a-, a+] = [0.6, 1.2]: symmetric with a lower c_low
        hurt = [_cmp(S[s, "bapo"]["final_accuracy"], S[s, "symmetric"]["final_accuracy"], higher=False) for s in stale]
        spikes = [_cmp(S[s, "bapo"]["grad_norm_max"], S[s, "symmetric"]["grad_norm_max"]) for s in stale]
        peak = lambda s, r: _m(S[s, r]["grad_norm_max"])
        low_text = (f"BAPO sat at [{bapo_low:.2f}, {bapo_high:.2f}], i.e. symmetric with c_low lowered to 0.6: final "
                    "accuracy lower than symmetric's at " + ", ".join(f"{s} {_word(*h)}" for s, h in zip(stale, hurt))
                    + "; largest gradient norm higher at "
                    + ", ".join(f"{s} {peak(s, 'bapo'):.1f} vs {peak(s, 'symmetric'):.1f} {_word(*g)}"
                                for s, g in zip(stale, spikes)))
        parts3.append((any(h[0] or g[0] for h, g in zip(hurt, spikes)),
                       any(h[1] or g[1] for h, g in zip(hurt, spikes))))
    lines.append(verdict_line(3, "raising c_high keeps entropy up and helps; lowering c_low hurts", _verdict(parts3),
                              "clip-higher vs symmetric, final entropy higher: "
                              + ", ".join(f"{s} {_word(*e)}" for s, e in zip(stale, ent))
                              + "; final accuracy higher: "
                              + ", ".join(f"{s} {_word(*a)}" for s, a in zip(stale, acc))
                              + f"; {low_text}"))

    # 4: BAPO keeps ρ near ρ0, entropy steadier, gradient smoother
    reached = _m([_m(S[s, "bapo"]["rho_reached"]) for s in stale])
    searched = _m([_m(S[s, "bapo"]["searched"]) for s in stale])
    lows = np.concatenate([S[s, "bapo"]["rho_before_min"] for s in stale])
    lowest = float(np.nanmin(lows)) if np.isfinite(lows).any() else math.nan
    rho = _m([_m(S[s, "bapo"]["rho"]) for s in stale])
    steady = [_cmp(S[s, "bapo"]["entropy_drop"], S[s, "symmetric"]["entropy_drop"], higher=False) for s in stale]
    smooth_ = [_cmp(S[s, "bapo"]["grad_roughness"], S[s, "symmetric"]["grad_roughness"], higher=False) for s in stale]
    parts4 = [(reached > 0.9, reached > 0.9), (all(e[0] for e in steady), any(e[1] for e in steady)),
              (all(g[0] for g in smooth_), any(g[1] for g in smooth_))]
    holds4 = "not tested (BAPO never searched)" if searched < 0.01 else _verdict(parts4)
    lines.append(verdict_line(4, "BAPO keeps ρ near ρ0, entropy steadier, gradient norm smoother", holds4,
                              f"ρ >= ρ0 after the search in {reached:.0%} of BAPO's updates, but the search moved the "
                              f"bounds in only {searched:.0%} of them (lowest ρ before it: {lowest:.3f}; mean ρ "
                              f"{rho:.2f}, ρ0 = {RHO0}); bounds average c_low {bapo_low:.2f}, c_high {bapo_high:.2f} "
                              "(paper: ≈ 0.7 and 2.0–2.2); "
                              "smaller entropy drop than symmetric: "
                              + ", ".join(f"{s} {_word(*e)}" for s, e in zip(stale, steady))
                              + "; smoother gradient norm: "
                              + ", ".join(f"{s} {_word(*g)}" for s, g in zip(stale, smooth_))))

    # 5: BAPO > clip-higher >= symmetric (final accuracy)
    focus = focus or [s for s in stale if s in ("reuse-2", "reuse-4")] or list(stale)
    t = rule_tests(results, focus)
    ok = [(t[s]["bapo"] > t[s]["clip-higher"] >= t[s]["symmetric"], t[s]["p_bapo_vs_ch"] < ALPHA
           and t[s]["bapo"] > t[s]["clip-higher"] >= t[s]["symmetric"]) for s in focus]
    lines.append(verdict_line(5, "BAPO > clip-higher >= symmetric (final accuracy)", _verdict(ok),
                              "; ".join(f"{s}: BAPO {t[s]['bapo']:.3f}, clip-higher {t[s]['clip-higher']:.3f}, symmetric "
                                        f"{t[s]['symmetric']:.3f} (BAPO vs clip-higher p = {t[s]['p_bapo_vs_ch']:.2g}, "
                                        f"clip-higher vs symmetric p = {t[s]['p_ch_vs_sym']:.2g})" for s in focus)))
    return lines
